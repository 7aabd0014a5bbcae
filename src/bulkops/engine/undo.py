"""Undoing what the rows of a finished operation did: the rows an undo operation runs
(``UndoSource``) and how one row is undone (``UndoRunner`` for a pipeline's steps,
``UndoRowRunner`` for a row or batch operation's ``undo_row``).

An undo operation (``OperationRecord.undo_of``) has no rows of its own until they run: its
source walks what the undone operation's rows did (``RowStore.outcome_batches``; only
its Completed rows for a row or batch operation) by row number, keeps the rows that
completed at least one step with an undo, and pairs each with the data it ran with (its
kept row data, else the file's row with the fixes it was read with). The undo operation's
own records are walked beside them, so a resumed run skips every row already recorded
(each row's undos ran once) and memory stays flat whatever the size.

A row or batch operation's row has one thing to undo and nothing to carry but its data, so
its rows come without a pending record: fresh ones run in the plain row loop
(``loops.run_plain``), and a completed undo leaves only its number and time (its data
too when the operation keeps rows' data); a failed one keeps its data for a retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition, StepDefinition
from bulkops.definition.row_context import row_frame
from bulkops.engine.config import Stores
from bulkops.engine.instance import OperationFailed
from bulkops.engine.invoke import direct_call, error_text, invoke
from bulkops.engine.pipeline import PipelineRunner, backoff_delay
from bulkops.engine.resume import (
    BATCH_SIZE,
    CELL_FORMATS,
    RowBatch,
    RowData,
    StoredRows,
    operation_rows,
    source_fixes,
)
from bulkops.engine.rows import RowBasics, RowRunner
from bulkops.engine.undo_plan import undo_plan
from bulkops.formats import FileFormat, RawRow
from bulkops.storage.records import OperationRecord, RowOutcome, RowRecord, StepState
from bulkops.storage.states import ErrorType, RowState

if TYPE_CHECKING:
    from bulkops.engine.ports import StorageCalls

_BATCH = 5_000  # the undone operation's row outcomes read a query at a time
NO_DATA = "The row's data was neither kept nor readable from the file, so it cannot be undone"


def _undo_record(
    undo_id: Any, record: RowOutcome, plan: list[StepDefinition], *, pipeline: bool
) -> RowRecord:
    """The Pending record of an undo operation's row: a pipeline's steps are the steps to
    undo, in the order they are undone, each under the undone step's name and index."""
    return RowRecord(
        operation_id=undo_id,
        row_number=record.row_number,
        state=RowState.PENDING,
        row_id=record.row_id,
        step_index=plan[0].index,
        step_name=plan[0].name,
        row_data=record.row_data,
        steps=[StepState(step.name, step.index) for step in plan] if pipeline else [],
    )


class UndoSource:
    """Yields batches of ``(raw row, pending undo record)`` for the rows to undo that the
    undo operation has not recorded yet; a row or batch operation's rows come with None
    (their one undo needs no plan)."""

    def __init__(
        self,
        undo_id: Any,
        definition: OperationDefinition,
        originals: AsyncIterator[list[RowOutcome]],
        done: StoredRows | None,
        file_rows: Iterator[RawRow] | None,
        data: RowData,
    ) -> None:
        self._undo_id = undo_id
        self._definition = definition
        self._originals = originals
        self._read: list[RowOutcome] = []  # the batch of outcomes being walked
        self._at = 0  # the next one in it
        self._done = done
        self._file = file_rows
        self._next_file: RawRow | None = None
        self._data = data

    def __aiter__(self) -> UndoSource:
        return self

    async def __anext__(self) -> RowBatch:
        batch: RowBatch = []
        definition, done = self._definition, self._done
        pipeline = definition.is_step_based
        while len(batch) < BATCH_SIZE:
            if self._at == len(self._read):
                read = await anext(self._originals, None)
                if read is None:
                    break
                self._read, self._at = read, 0
            original = self._read[self._at]
            self._at += 1
            plan = undo_plan(definition, original)
            if not plan:
                continue
            if done is not None:
                stored = await done.find(original.row_number)
                if stored is not None and stored.state.is_final:
                    continue  # recorded by an earlier run: its undos ran
            raw = self._raw(original)
            if not pipeline:
                batch.append((raw, None))
                continue
            pending = _undo_record(self._undo_id, original, plan, pipeline=pipeline)
            if raw.raw is not None:
                pending.row_data = raw.raw
            batch.append((raw, pending))
        if not batch:
            raise StopAsyncIteration
        return batch

    def _raw(self, original: RowOutcome) -> RawRow:
        if original.row_data is not None:
            return self._data.raw(original.row_number, original.row_data)
        found = self._file_row(original.row_number)
        if found is None:
            return RawRow(original.row_number, None, None, NO_DATA)
        return found

    def _file_row(self, number: int) -> RawRow | None:
        if self._file is None:
            return None
        current = self._next_file
        while current is None or current.number < number:
            current = next(self._file, None)
            if current is None:
                self._file = None
                return None
        self._next_file = current
        return current if current.number == number else None


class UndoRowRunner(RowRunner):
    """Undoes rows of a row or batch operation: one ``undo_row`` call each, with the
    row's data as it was run (no ``validate_row``, no rate limit: the row ran them).
    ``current_row()`` says ``undo=True`` and the step ``process``; its key is the undo
    operation's. Its fresh rows may run in ``loops.run_plain`` (``process`` is the
    ``undo_row``); a failed row keeps its data, so that a retry can undo it again. Like
    the one step it undoes (``process``, which has none), an undo is not retried per row."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        RowBasics.__init__(self, *args, **kwargs)  # not RowRunner's: no process_row here
        self.scope = replace(self.scope, undo=True)
        self.process = direct_call(getattr(self.instance, "undo_row"))  # noqa: B009
        self.direct = True

    def new_record(self, raw: RawRow, state: RowState, row_id: str | None = None) -> RowRecord:
        """A record for a row: a failed one always carries its data (a retry runs from it),
        a completed one when the operation keeps rows' data."""
        record = super().new_record(raw, state, row_id)
        if state is RowState.FAILED and record.row_data is None:
            record.row_data = raw.raw
        return record

    async def run(self, raw: RawRow, existing: RowRecord | None = None) -> RowRecord:
        """Undo one row (resumed, retried, or run beside others); never raises for
        row-level problems."""
        converted = self.convert(raw, existing)
        steps = [] if existing is None else [replace(state) for state in existing.steps]
        if isinstance(converted, RowRecord):
            converted.steps = steps
            return converted
        row, row_id = converted
        retry_attempt = 0 if existing is None else existing.retry_attempt
        record = await self.processed(raw, row, row_id, retry_attempt)
        record.retry_attempt, record.steps = retry_attempt, steps
        return record


class UndoRunner(PipelineRunner):
    """Undoes one row of a pipeline: the undos of its completed steps in reverse step
    order, each with per-step retries like the step it undoes.
    ``current_row()`` in an undo says ``undo=True`` and names the step undone; its key is
    the undo operation's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scope = replace(self.scope, undo=True)
        self._keep_data = True  # a failed undo is retried from its record
        self._undos = self._bind_undos()

    def _bind_undos(self) -> dict[int, Callable[..., Any]]:
        return {
            step.index: getattr(self.instance, step.undo_name)
            for step in self.definition.steps
            if step.undo_name is not None
        }

    async def run(self, raw: RawRow, existing: RowRecord | None = None) -> RowRecord:
        """Undo one row; never raises for row-level problems."""
        converted = self.convert(raw, existing)
        steps = [] if existing is None else [replace(state) for state in existing.steps]
        if isinstance(converted, RowRecord):
            converted.steps = steps  # the plan stays for a retry
            return converted
        row, row_id = converted
        record = self.new_record(raw, RowState.RUNNING, row_id)
        record.completed_at = None
        record.steps = steps
        if existing is not None:
            record.retry_attempt = existing.retry_attempt
        token = row_frame.set(None)
        try:
            for state in record.steps:
                if state.state is RowState.COMPLETED:
                    continue  # undone in an earlier round
                failure = await self._undo_step(record, state, row)
                if failure is not None:
                    return self._failed(record, state, failure)
        finally:
            row_frame.reset(token)
        record.state = RowState.COMPLETED
        record.error_type = record.error_message = None
        record.completed_at = utcnow()
        return record

    async def _undo_step(self, record: RowRecord, state: StepState, row: Any) -> str | None:
        undo = self._undos.get(state.index)
        if undo is None:
            return f"Step '{state.name}' defines no undo"
        step = self.definition.steps[state.index]
        record.step_index, record.step_name = state.index, state.name
        state.started_at = state.started_at or utcnow()
        retries = 0
        while True:
            state.attempts += 1
            state.state = RowState.RUNNING
            row_frame.set(
                (
                    self.scope,
                    record.row_number,
                    record.row_id,
                    state.name,
                    state.index,
                    retries + 1,
                    record.retry_attempt,
                )
            )
            try:
                await invoke(undo, row, self.metadata)
            except Exception as exc:
                if retries >= step.max_retries:
                    return error_text(exc)
                retries += 1
                await asyncio.sleep(backoff_delay(retries, self._retry_delay))
                continue
            state.state, state.completed_at = RowState.COMPLETED, utcnow()
            return None

    def _failed(self, record: RowRecord, state: StepState, message: str) -> RowRecord:
        error_type = ErrorType.STEP_FAILURE
        now = utcnow()
        state.state, state.error_type, state.error_message = RowState.FAILED, error_type, message
        state.completed_at = now
        record.state, record.error_type, record.error_message = RowState.FAILED, error_type, message
        record.step_index, record.step_name, record.completed_at = state.index, state.name, now
        return record


@asynccontextmanager
async def undo_source(
    stores: Stores, retry: StorageCalls, record: OperationRecord, definition: OperationDefinition
) -> AsyncGenerator[UndoSource, None]:
    """The rows the undo operation ``record`` still has to undo. The undone operation's
    file is opened only when its rows' data was not kept (it is read in step with them,
    with the fixes its rows were read with)."""
    if record.undo_of is None:
        raise ValueError("not an undo operation")
    original = await retry.call(stores.operations.get, record.undo_of)
    if original is None:
        raise OperationFailed(f"The operation undone ({record.undo_of}) is gone")
    fmt = FileFormat(original.file_format)
    data = RowData(definition, drop_empty=fmt in CELL_FORMATS, column_map=original.column_map)
    done = await StoredRows.load(stores.rows, record.id)
    # A row or batch operation's row did something to undo only when it completed.
    states = None if definition.is_step_based else (RowState.COMPLETED,)
    originals = stores.rows.outcome_batches(original.id, batch_size=_BATCH, states=states)
    async with AsyncExitStack() as stack:
        file_rows: Generator[RawRow, None, None] | None = None
        if not definition.track_row_data:
            path = await stack.enter_async_context(stores.files.local_path(original.file_id))
            fixes = await retry.call(source_fixes, stores.operations, stores.rows, original)
            file_rows = operation_rows(
                path,
                replace(definition, track_row_data=True),  # the data goes with the undo's rows
                original.file_format,
                original.column_map,
                sheet=original.sheet,
                fixes=fixes,
            )
            stack.callback(file_rows.close)
        yield UndoSource(record.id, definition, originals, done, file_rows, data)
