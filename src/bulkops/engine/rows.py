"""Running one data row of a row-based operation: convert, validate, process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast
from uuid import UUID

import pydantic
from pydantic_core import SchemaValidator

from bulkops.clock import CoarseClock
from bulkops.definition.controls import RateLimit
from bulkops.definition.conversion import describe_errors
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
    PROCESS_STEP,
    VALIDATION_STEP,
    OperationBase,
    OperationDefinition,
)
from bulkops.definition.row_context import RowScope, row_frame, row_restart
from bulkops.engine.invoke import direct_call, error_text
from bulkops.engine.ports import Pacing
from bulkops.errors import ValidationError
from bulkops.formats import RawRow
from bulkops.storage.records import RowRecord, StepState
from bulkops.storage.states import ErrorType, RowState

UNREADABLE = "Row could not be read"  # a row the reader could not split into values


class RowBasics:
    """What every runner does before its steps: parse, convert, identify and validate."""

    def __init__(
        self,
        definition: OperationDefinition,
        instance: OperationBase[Any, Any],
        metadata: Metadata,
        operation_id: UUID,
        *,
        pacer: Pacing | None = None,
        created_by: str = "",
    ) -> None:
        self.definition = definition
        self.instance = instance
        self.metadata = metadata
        self.operation_id = operation_id
        self.pacer = pacer
        # What current_row() tells user code of the operation (its rows add their own).
        self.scope = RowScope(operation_id, definition.name, created_by)
        self.validate_model = _validator(definition.row_model)  # the row model, uncalled
        self._keep_data = definition.track_row_data
        self.clock = CoarseClock()  # completion times
        self._validate = direct_call(instance.validate_row)

    @property
    def plain(self) -> bool:
        """Whether a fresh row that completes leaves nothing to record but its number
        and time (no row data kept, no business key): it goes to the recorder as a number
        in a span of completions, not as a record."""
        return not (self.definition.track_row_data or self.definition.overrides_row_id)

    def new_record(self, raw: RawRow, state: RowState, row_id: str | None = None) -> RowRecord:
        """A record for a row, carrying its data when the operation tracks it."""
        return RowRecord(
            operation_id=self.operation_id,
            row_number=raw.number,
            state=state,
            row_id=row_id,
            step_index=0,
            step_name=PROCESS_STEP,
            row_data=raw.raw if self._keep_data else None,
            completed_at=self.clock.now(),
        )

    def pending_steps(self) -> list[StepState]:
        """Per-step progress for a pipeline row that has not started (empty otherwise)."""
        if not self.definition.is_step_based:
            return []
        return [StepState(step.name, step.index) for step in self.definition.steps]

    def invalid(
        self, raw: RawRow, error_type: ErrorType, message: str, row_id: str | None = None
    ) -> RowRecord:
        """A row that failed before its first step (stepIndex -1)."""
        record = self.new_record(raw, RowState.FAILED, row_id)
        record.step_index, record.step_name = -1, VALIDATION_STEP
        record.error_type, record.error_message = error_type, message
        record.steps = self.pending_steps()
        if record.row_data is None and raw.raw is not None and raw.error is not None:
            record.row_data = raw.raw
        return record

    def parse(self, raw: RawRow) -> Row | RowRecord:
        """The row model, or a failed record when the row cannot be parsed or converted.

        Sources leave empty CSV cells out of ``raw.values``, so they count as missing.
        """
        if raw.error is not None or raw.values is None:
            return self.invalid(raw, ErrorType.VALIDATION, raw.error or UNREADABLE)
        try:
            row: Row = self.validate_model(raw.values)
        except pydantic.ValidationError as exc:
            return self.invalid(raw, ErrorType.VALIDATION, describe_errors(exc))
        return row

    def row_id(self, row: Row) -> str | None:
        """The row's business key, when the model defines one."""
        if not self.definition.overrides_row_id:
            return None
        try:
            value = row.row_id()
        except Exception:  # a broken row_id() must not fail the row
            return None
        return None if value is None else str(value)

    def convert(
        self, raw: RawRow, existing: RowRecord | None = None
    ) -> tuple[Row, str | None] | RowRecord:
        """Parse and convert: the row and its id, or the failed record (which keeps the
        retry attempt of ``existing``). ``prepare`` without ``validate_row``."""
        parsed = self.parse(raw)
        if isinstance(parsed, RowRecord):
            return _attempt(parsed, existing)
        return parsed, self.row_id(parsed)

    async def prepare(
        self, raw: RawRow, existing: RowRecord | None = None
    ) -> tuple[Row, str | None] | RowRecord:
        """Parse and validate: the row and its id, or the failed record (which keeps the
        retry attempt of ``existing``)."""
        converted = self.convert(raw, existing)
        if isinstance(converted, RowRecord):
            return converted
        parsed, row_id = converted
        if self.definition.overrides_validate_row:
            retry_attempt = 0 if existing is None else existing.retry_attempt
            token = row_frame.set((self.scope, raw.number, row_id, None, -1, 1, retry_attempt))
            try:
                await self._validate(parsed, self.metadata)
            except ValidationError as exc:
                return _attempt(self.invalid(raw, ErrorType.VALIDATION, str(exc), row_id), existing)
            except Exception as exc:
                failed = self.invalid(raw, ErrorType.PROCESSING, error_text(exc), row_id)
                return _attempt(failed, existing)
            finally:
                row_frame.reset(token)
        return parsed, row_id

    async def pace(self, step_name: str | None = None, rate: RateLimit | None = None) -> None:
        """Wait for the rate limit of the operation (or of ``step_name``) before a call."""
        rate = rate if step_name is not None else self.definition.controls.rate_limit
        if rate is not None and self.pacer is not None:
            await self.pacer.before(rate_key(self.definition.name, step_name), rate)


def _validator(model: type[Row]) -> Callable[[Any], Row]:
    """``model.model_validate`` without its Python wrapper (a call per row), once the
    model's schema is built."""
    validator = model.__pydantic_validator__
    if isinstance(validator, SchemaValidator):
        return cast(Callable[[Any], Row], validator.validate_python)
    return model.model_validate


def _restart_of(existing: RowRecord | None) -> int:
    """How often a row of a row operation was restarted: its one stored step carries it
    (``lifecycle.reset_for_restart``); 0 for a row never restarted, which stores none."""
    if existing is None or not existing.steps:
        return 0
    return existing.steps[0].restart


def _restarted(record: RowRecord, restart: int) -> RowRecord:
    """The record keeping the row's restart number in its one step (as its state), so
    that its next restart counts on from it; a row never restarted stores no step."""
    if restart:
        ended = record.state.is_final
        record.steps = [
            StepState(
                PROCESS_STEP,
                0,
                state=record.state,
                attempts=1 if ended else 0,
                completed_at=record.completed_at if ended else None,
                error_type=record.error_type,
                error_message=record.error_message,
                restart=restart,
            )
        ]
    return record


def _attempt(record: RowRecord, existing: RowRecord | None) -> RowRecord:
    if existing is not None:
        record.retry_attempt = existing.retry_attempt
    return record


class RowRunner(RowBasics):
    """Runs rows of a row-based operation: one ``process_row`` call each."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.process = direct_call(getattr(self.instance, "process_row"))  # noqa: B009
        controls = self.definition.controls
        # Nothing to await before a row but its process_row: no validate_row, no wait for
        # a rate limit (``loops.run_plain`` then runs it without another coroutine).
        self.direct = not self.definition.overrides_validate_row and (
            controls.rate_limit is None or self.pacer is None
        )

    async def run(self, raw: RawRow, existing: RowRecord | None = None) -> RowRecord:
        """Validate and process one raw row; never raises for row-level problems."""
        restart = _restart_of(existing)
        prepared = await self.prepare(raw, existing)
        if isinstance(prepared, RowRecord):
            return _restarted(prepared, restart)
        row, row_id = prepared
        await self.pace()  # outside the try: a storage fault is not the row's failure
        retry_attempt = 0 if existing is None else existing.retry_attempt
        restart_token = row_restart.set(restart)
        try:
            record = await self.processed(raw, row, row_id, retry_attempt)
        finally:
            row_restart.reset(restart_token)
        if existing is not None:
            record.retry_attempt = existing.retry_attempt
        return _restarted(record, restart)

    async def processed(
        self, raw: RawRow, row: Row, row_id: str | None, retry_attempt: int
    ) -> RowRecord:
        """Call ``process`` on one valid row in its row context: its record, Completed, or
        Failed with the error (a row's exception never escapes)."""
        token = row_frame.set((self.scope, raw.number, row_id, PROCESS_STEP, 0, 1, retry_attempt))
        try:
            await self.process(row, self.metadata)
        except Exception as exc:
            record = self.new_record(raw, RowState.FAILED, row_id)
            record.error_type, record.error_message = ErrorType.PROCESSING, error_text(exc)
        else:
            record = self.new_record(raw, RowState.COMPLETED, row_id)
        finally:
            row_frame.reset(token)
        return record

    async def checked(self, raw: RawRow) -> Row | RowRecord:
        """A fresh row made ready to process: ``prepare`` (``validate_row`` included), then
        the wait for the rate limit; or its failed record."""
        prepared = await self.prepare(raw)
        if isinstance(prepared, RowRecord):
            return prepared
        await self.pace()
        return prepared[0]


def rate_key(operation_name: str, step_name: str | None = None) -> str:
    """The shared key of an operation's (or one of its steps') rate limit."""
    base = operation_name.casefold()
    return base if step_name is None else f"{base}:{step_name}"
