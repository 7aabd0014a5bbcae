"""RowStore on SQL: the hot paths go to the database's dialect, the rest is SQLAlchemy Core."""

from __future__ import annotations

import builtins
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import TypeVar
from uuid import UUID

from bulkops.storage.records import (
    CompletedSpan,
    EventRecord,
    Fence,
    Page,
    ProgressDelta,
    ReportValues,
    RowOutcome,
    RowQuery,
    RowRecord,
    RowWrite,
    WaitOutcome,
)
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.bulk import (
    SplitRows,
    SplitWrite,
    completed_step_names,
    split_plain_spans,
)
from bulkops.storage.sql.pages import read_page
from bulkops.storage.states import OperationStatus, RowState


class RowMethods(SqlBase):
    """The RowStore half of ``SqlStore``."""

    async def save(
        self,
        operation_id: UUID,
        rows: Sequence[RowRecord],
        delta: ProgressDelta,
        events: Sequence[EventRecord] = (),
        *,
        fence: Fence | None = None,
        completed: Sequence[CompletedSpan] = (),
    ) -> OperationStatus | None:
        """Upsert row records and completed spans, add ``delta`` and record ``events`` in
        one transaction; see ``RowStore.save``."""
        write = RowWrite(operation_id, rows, delta, events, fence, completed)
        return (await self.save_many([write]))[0]

    async def save_many(self, writes: Sequence[RowWrite]) -> builtins.list[OperationStatus | None]:
        """Several saves in one transaction, each fenced on its own; see
        ``RowStore.save_many``."""
        for write in writes:
            write.check()
        if not writes:
            return []
        split = [self._split(write) for write in writes]
        statuses = await self._db.dialect.save_many(split)
        written: builtins.list[EventRecord] = []
        for write, entry, status in zip(writes, split, statuses, strict=True):
            if status is not None and not status.is_terminal:  # final: nothing written
                self._listed_steps.add(write.operation_id, entry.rows.new_steps)
                written.extend(write.events)
        if not self._events_here:
            await self._after_commit(written)
        return statuses

    def _split(self, write: RowWrite) -> SplitWrite:
        """A write as the dialect takes it: plain completions in spans, the step names
        ``completed_steps`` may not list yet, and its events when they go in the
        transaction."""
        spans, others = split_plain_spans(write.rows)
        spans += write.completed
        steps = completed_step_names(spans, others)
        names = self._listed_steps.new(write.operation_id, steps)
        inside = write.events if self._events_here else ()
        rows = SplitRows(spans, others, names)
        return SplitWrite(write.operation_id, rows, write.delta, inside, write.fence)

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One row record, or None when unknown."""
        return await self._db.dialect.get_row(operation_id, row_number)

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number (see ``read_page``)."""
        read = functools.partial(read_page, query=query, counts=self._db.page_counts)
        return await self._db.read_core(read)

    async def iterate(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
        after: int = 0,
    ) -> AsyncIterator[RowRecord]:
        """Every row record above ``after`` (or those in ``states``) by row number, one
        keyset batch per transaction; no connection is held while the caller consumes a
        batch."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        while True:
            records = await self._db.dialect.read_batch(operation_id, after, batch_size, states)
            for record in records:
                yield record
            if len(records) < batch_size:
                return
            after = records[-1].row_number

    async def report_batches(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
    ) -> AsyncIterator[builtins.list[ReportValues]]:
        """The report values of ``iterate``'s rows, one keyset batch per transaction."""
        read = self._db.dialect.read_report_batch
        async for batch in _keyset(read, operation_id, 0, batch_size, states, _first):
            yield batch

    async def outcome_batches(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
        after: int = 0,
    ) -> AsyncIterator[builtins.list[RowOutcome]]:
        """The row outcomes of ``iterate``'s rows, one keyset batch per transaction."""
        read = self._db.dialect.read_outcome_batch
        async for batch in _keyset(read, operation_id, after, batch_size, states, _number):
            yield batch

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The first waiting row (by waiting time, then row number) with that key prefix."""
        return await self._db.dialect.find_waiting(operation_id, key_prefix)

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """End a wait when the row still waits with that key; None otherwise."""
        return await self._db.dialect.resolve_wait(operation_id, row_number, signal_key, outcome)

    async def resolve_first_waiting(
        self, operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
    ) -> RowRecord | None:
        """End the wait of the first row waiting under the key prefix, in one transaction."""
        return await self._db.dialect.resolve_first_waiting(operation_id, key_prefix, outcome)


_Item = TypeVar("_Item")


def _first(values: ReportValues) -> int:
    return int(values[0])


def _number(outcome: RowOutcome) -> int:
    return outcome.row_number


async def _keyset(
    read: Callable[[UUID, int, int, Collection[RowState] | None], Awaitable[builtins.list[_Item]]],
    operation_id: UUID,
    after: int,
    batch_size: int,
    states: Collection[RowState] | None,
    row_number: Callable[[_Item], int],
) -> AsyncIterator[builtins.list[_Item]]:
    """Batches of ``read`` after row ``after``, each read in its own transaction, until one
    comes back short (keyset paging by row number)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    while True:
        batch = await read(operation_id, after, batch_size, states)
        if batch:
            yield batch
        if len(batch) < batch_size:
            return
        after = row_number(batch[-1])
