"""Running one data row of a row-based operation: convert, validate, process."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.definition.conversion import convert
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
    PROCESS_STEP,
    VALIDATION_STEP,
    OperationBase,
    OperationDefinition,
)
from bulkops.engine.invoke import error_text, invoke
from bulkops.errors import ValidationError
from bulkops.formats import RawRow
from bulkops.storage.records import RowRecord
from bulkops.storage.states import ErrorType, RowState


class RowRunner:
    """Turns raw rows into finished row records for one operation run."""

    def __init__(
        self,
        definition: OperationDefinition,
        instance: OperationBase[Any, Any],
        metadata: Metadata,
        operation_id: UUID,
        *,
        empty_is_missing: bool,
    ) -> None:
        self._definition = definition
        self._instance = instance
        self._metadata = metadata
        self._operation_id = operation_id
        self._empty_is_missing = empty_is_missing
        self._keep_data = definition.track_row_data
        self._process = getattr(instance, "process_row")  # noqa: B009 - resolved once

    def _record(self, raw: RawRow, state: RowState, row_id: str | None = None) -> RowRecord:
        return RowRecord(
            operation_id=self._operation_id,
            row_number=raw.number,
            state=state,
            row_id=row_id,
            step_index=0,
            step_name=PROCESS_STEP,
            row_data=raw.raw if self._keep_data else None,
            completed_at=utcnow(),
        )

    def _failed(
        self,
        raw: RawRow,
        error_type: ErrorType,
        message: str,
        *,
        row_id: str | None = None,
        validation: bool = True,
    ) -> RowRecord:
        record = self._record(raw, RowState.FAILED, row_id)
        if validation:
            record.step_index, record.step_name = -1, VALIDATION_STEP
        record.error_type = error_type
        record.error_message = message
        if record.row_data is None and raw.raw is not None and raw.error is not None:
            record.row_data = raw.raw
        return record

    def parse(self, raw: RawRow) -> Row | RowRecord:
        """The row model, or a failed record when the row cannot be parsed or converted."""
        if raw.error is not None or raw.values is None:
            return self._failed(raw, ErrorType.VALIDATION, raw.error or "Row could not be read")
        try:
            return convert(
                self._definition.row_model, raw.values, empty_is_missing=self._empty_is_missing
            )
        except ValidationError as exc:
            return self._failed(raw, ErrorType.VALIDATION, str(exc))

    def row_id(self, row: Row) -> str | None:
        """The row's business key, when the model defines one."""
        if not self._definition.overrides_row_id:
            return None
        try:
            value = row.row_id()
        except Exception:  # a broken row_id() must not fail the row
            return None
        return None if value is None else str(value)

    async def run(self, raw: RawRow) -> RowRecord:
        """Validate and process one raw row; never raises for row-level problems."""
        parsed = self.parse(raw)
        if isinstance(parsed, RowRecord):
            return parsed
        row_id = self.row_id(parsed)
        if self._definition.overrides_validate_row:
            try:
                await invoke(self._instance.validate_row, parsed, self._metadata)
            except ValidationError as exc:
                return self._failed(raw, ErrorType.VALIDATION, str(exc), row_id=row_id)
            except Exception as exc:
                return self._failed(raw, ErrorType.PROCESSING, error_text(exc), row_id=row_id)
        try:
            await invoke(self._process, parsed, self._metadata)
        except Exception as exc:
            return self._failed(
                raw, ErrorType.PROCESSING, error_text(exc), row_id=row_id, validation=False
            )
        return self._record(raw, RowState.COMPLETED, row_id)
