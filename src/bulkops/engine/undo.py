"""Undoing what the rows of a finished operation did: the rows an undo operation runs
(``UndoSource``) and how one row is undone (``UndoRunner``).

An undo operation (``OperationRecord.undo_of``) has no rows of its own until they run: its
source walks the undone operation's stored records by row number, keeps the rows that
completed at least one step with an undo, and pairs each with the data it ran with (its
kept row data, else the file's row with the fixes it was read with). The undo operation's
own records are walked beside them, so a resumed run skips every row already recorded
(each row's undos ran once) and memory stays flat whatever the size.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

from bulkops.clock import utcnow
from bulkops.definition.operation import PROCESS_STEP, OperationDefinition, StepDefinition
from bulkops.definition.row_context import row_frame
from bulkops.engine.context import Stores
from bulkops.engine.instance import OperationFailed
from bulkops.engine.invoke import error_text, invoke
from bulkops.engine.persistence import StorageRetry
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
from bulkops.engine.undo_plan import undo_plan
from bulkops.formats import FileFormat, RawRow
from bulkops.storage.records import OperationRecord, RowRecord, StepState
from bulkops.storage.states import ErrorType, RowState

_BATCH = 5_000  # the undone operation's records read a query at a time
NO_DATA = "The row's data was neither kept nor readable from the file, so it cannot be undone"


def _undo_record(
    undo_id: Any, record: RowRecord, plan: list[StepDefinition], *, pipeline: bool
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
    undo operation has not recorded yet."""

    def __init__(
        self,
        undo_id: Any,
        definition: OperationDefinition,
        originals: AsyncIterator[RowRecord],
        done: StoredRows | None,
        file_rows: Iterator[RawRow] | None,
        data: RowData,
    ) -> None:
        self._undo_id = undo_id
        self._definition = definition
        self._originals = originals
        self._done = done
        self._file = file_rows
        self._next_file: RawRow | None = None
        self._data = data

    def __aiter__(self) -> UndoSource:
        return self

    async def __anext__(self) -> RowBatch:
        batch: RowBatch = []
        async for original in self._originals:
            plan = undo_plan(self._definition, original)
            if not plan:
                continue
            stored = None if self._done is None else await self._done.find(original.row_number)
            if stored is not None and stored.state.is_final:
                continue  # recorded by an earlier run: its undos ran
            pipeline = self._definition.is_step_based
            pending = _undo_record(self._undo_id, original, plan, pipeline=pipeline)
            raw = self._raw(original)
            if raw.raw is not None:
                pending.row_data = raw.raw
            batch.append((raw, pending))
            if len(batch) >= BATCH_SIZE:
                break
        if not batch:
            raise StopAsyncIteration
        return batch

    def _raw(self, original: RowRecord) -> RawRow:
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


class UndoRunner(PipelineRunner):
    """Undoes one row: the undos of its completed steps in reverse step order (a row or
    batch operation's ``undo_row``), each with per-step retries like the step it undoes.
    ``current_row()`` in an undo says ``undo=True`` and names the step undone; its key is
    the undo operation's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scope = replace(self.scope, undo=True)
        self._keep_data = True  # a failed undo is retried from its record
        self._undos = self._bind_undos()

    def _bind_undos(self) -> dict[int, Callable[..., Any]]:
        if not self.definition.is_step_based:
            if not self.definition.undo_row:
                return {}
            return {0: getattr(self.instance, "undo_row")}  # noqa: B009
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
        single = not self.definition.is_step_based
        plan = [StepState(PROCESS_STEP, 0)] if single else record.steps
        token = row_frame.set(None)
        try:
            for state in plan:
                if state.state is RowState.COMPLETED:
                    continue  # undone in an earlier round
                failure = await self._undo_step(record, state, row)
                if failure is not None:
                    return self._failed(record, state, failure, single)
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

    def _failed(self, record: RowRecord, state: StepState, message: str, single: bool) -> RowRecord:
        error_type = ErrorType.PROCESSING if single else ErrorType.STEP_FAILURE
        now = utcnow()
        state.state, state.error_type, state.error_message = RowState.FAILED, error_type, message
        state.completed_at = now
        record.state, record.error_type, record.error_message = RowState.FAILED, error_type, message
        record.step_index, record.step_name, record.completed_at = state.index, state.name, now
        return record


@asynccontextmanager
async def undo_source(
    stores: Stores, retry: StorageRetry, record: OperationRecord, definition: OperationDefinition
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
    originals = stores.rows.iterate(original.id, batch_size=_BATCH)
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
