"""RowStore on SQL: the hot paths go to the dialect's module, the rest is SQLAlchemy Core."""

from __future__ import annotations

import builtins
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, RowMapping, Select, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.records import (
    CompletedRun,
    EventRecord,
    Fence,
    Page,
    ProgressDelta,
    ReportValues,
    RowQuery,
    RowRecord,
    StepState,
    WaitOutcome,
)
from bulkops.storage.sql import postgres, sqlite
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.schema import not_completed, operations, row_records
from bulkops.storage.states import OperationStatus, RowState

# Row counts of finished operations, by (operation id, version): their rows change only
# through a retry, which moves the version on. Kept per process, bounded.
_FINISHED_COUNTS_KEPT = 256
_SETTLED = frozenset({OperationStatus.COMPLETED, OperationStatus.COMPLETED_WITH_ERRORS})
# A page of Completed rows skips the others by their row numbers when there are at most
# this many (read from the state index: a few milliseconds).
_FEW_OTHERS = 10_000


def row_from_mapping(row: RowMapping) -> RowRecord:
    """The row record stored in a ``row_records`` row (read through the column types)."""
    values = {name: row[name] for name in row.keys()}
    steps = values.pop("steps")
    return RowRecord(**values, steps=[StepState.from_json(step) for step in steps] if steps else [])


_finished_counts: dict[tuple[UUID, int], tuple[int, bool]] = {}


def in_states(states: Collection[RowState]) -> builtins.list[ColumnElement[bool]]:
    """Row records in ``states``: with the condition of the partial state index when
    ``states`` leave Completed out, so the index serves them."""
    r = row_records.c
    wanted = list(states)
    found: builtins.list[ColumnElement[bool]] = [
        r.state == wanted[0] if len(wanted) == 1 else r.state.in_(wanted)
    ]
    if RowState.COMPLETED not in states:
        found.append(not_completed())
    return found


def _conditions(query: RowQuery) -> builtins.list[ColumnElement[bool]]:
    r = row_records.c
    conditions: builtins.list[ColumnElement[bool]] = [r.operation_id == query.operation_id]
    if query.failed_only:
        conditions += in_states((RowState.FAILED,))
    if query.state is not None:
        conditions += in_states((query.state,))
    if query.error_type is not None:
        conditions.append(r.error_type == query.error_type)
    if query.row_number is not None:
        conditions.append(r.row_number == query.row_number)
    if query.step_name is not None:
        conditions.append(r.step_name == query.step_name)
    return conditions


def page_select(query: RowQuery, *, gapless: bool = False) -> Select[Any]:
    """The rows of a page and one more (which tells whether another page follows): above
    the keyset cursor, in the row-number range of a gapless page, or at the page's offset."""
    r = row_records.c
    items = select(row_records).where(*_conditions(query)).order_by(r.row_number)
    offset = (query.page - 1) * query.page_size
    if query.after is not None:
        items = items.where(r.row_number > query.after)
    elif gapless:
        first = offset + 1
        items = items.where(r.row_number.between(first, first + query.page_size))
    else:
        items = items.offset(offset)
    return items.limit(query.page_size + 1)


def others_select(operation_id: UUID) -> Select[Any]:
    """The row numbers of an operation's rows that are not Completed, from the state index,
    unordered (in row order SQLite would read the primary key instead): at most one more
    than a Completed page skips by number."""
    r = row_records.c
    return (
        select(r.row_number)
        .where(r.operation_id == operation_id, not_completed())
        .limit(_FEW_OTHERS + 1)
    )


def check_paging(page: int, page_size: int) -> None:
    """Refuse paging values that cannot select a page."""
    if page < 1 or page_size < 1:
        raise ValueError(f"page and page_size must be at least 1, got {page} and {page_size}")


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
        completed: Sequence[CompletedRun] = (),
    ) -> OperationStatus | None:
        """Upsert row records and completed runs, add ``delta`` and record ``events`` in
        one transaction; see ``RowStore.save``."""
        if any(row.operation_id != operation_id for row in rows):
            raise ValueError(f"every saved row must belong to operation {operation_id}")
        inside = events if self._events_here else ()
        if self._db.is_sqlite:
            status = await self._db.write_sqlite(
                sqlite.save(operation_id, rows, delta, inside, fence, completed)
            )
        else:
            status = await postgres.save(
                self._db, operation_id, rows, delta, inside, fence, completed
            )
        if status is not None and not self._events_here:
            await self._after_commit(events)
        return status

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One row record, or None when unknown."""
        r = row_records.c
        stmt = select(row_records).where(r.operation_id == operation_id, r.row_number == row_number)
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
        return None if row is None else row_from_mapping(row)

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number.

        Filtered pages read the (operation, state, row number) index in order. An
        unfiltered page of a finished operation whose rows are numbered without gaps is
        the range of row numbers it covers (no OFFSET), its count kept per version.
        """
        check_paging(query.page, query.page_size)
        conditions = _conditions(query)
        count = select(func.count()).select_from(row_records).where(*conditions)
        async with self._db.read() as conn:
            dense = None if query.filtered else await self._finished_count(conn, query)
            completed = await self._completed_rows(conn, query)
            if completed is not None:
                total, items = completed
            elif dense is not None:
                total, items = dense[0], page_select(query, gapless=dense[1])
            else:
                total, items = (await conn.execute(count)).scalar_one(), page_select(query)
            found = (await conn.execute(items)).mappings().all()
        records = [row_from_mapping(row) for row in found[: query.page_size]]
        more = len(found) > query.page_size
        return Page(
            items=records,
            total_count=total,
            page=query.page,
            page_size=query.page_size,
            next_after=records[-1].row_number if more else None,
            keyset=query.after is not None,
        )

    async def _completed_rows(
        self, conn: AsyncConnection, query: RowQuery
    ) -> tuple[int, Select[Any]] | None:
        """(count, page statement) of the Completed rows of a completed operation whose rows
        are numbered without gaps and hold few others; else None.

        Completed rows are left out of the state index, so counting them, or skipping to a
        deep page of them, would read every row of the operation (140 ms for a page of a
        1M-row operation, 270 ms for its last). Here they are the row numbers less the
        others, which the index lists: the count is a subtraction, and the page starts
        after the row number below which exactly its offset of Completed rows lie.
        """
        if query.state is not RowState.COMPLETED or query.after is not None:
            return None
        if replace(query, state=None).filtered:
            return None
        dense = await self._finished_count(conn, query)
        if dense is None or not dense[1]:
            return None
        r = row_records.c
        others = sorted((await conn.execute(others_select(query.operation_id))).scalars())
        if len(others) > _FEW_OTHERS:
            return None
        offset = (query.page - 1) * query.page_size
        below = offset  # the least row number with `offset` Completed rows up to it
        while (before := bisect_right(others, below)) + offset != below:
            below = offset + before
        items = (
            select(row_records)
            .where(*_conditions(query), r.row_number > below)
            .order_by(r.row_number)
            .limit(query.page_size + 1)
        )
        return dense[0] - len(others), items

    async def _finished_count(
        self, conn: AsyncConnection, query: RowQuery
    ) -> tuple[int, bool] | None:
        """(rows, numbered without gaps) of a completed operation, else None."""
        o = operations.c
        found = (
            await conn.execute(select(o.status, o.version).where(o.id == query.operation_id))
        ).first()
        # Completed operations only: after a cancel or a failure, rows that were in flight
        # may still be recorded.
        if found is None or OperationStatus(found[0]) not in _SETTLED:
            return None
        key = (query.operation_id, int(found[1]))
        kept = _finished_counts.get(key)
        if kept is None:
            r = row_records.c
            stmt = select(func.count(), func.max(r.row_number)).where(
                r.operation_id == query.operation_id
            )
            total, highest = (await conn.execute(stmt)).one()
            kept = (int(total), int(total) == int(highest or 0))
            if len(_finished_counts) >= _FINISHED_COUNTS_KEPT:
                _finished_counts.pop(next(iter(_finished_counts)))
            _finished_counts[key] = kept
        return kept

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
            if self._db.is_sqlite:
                records = await self._db.read_sqlite(
                    sqlite.read_batch(operation_id, after, batch_size, states)
                )
            else:
                records = await postgres.read_batch(
                    self._db, operation_id, after, batch_size, states
                )
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
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        after = 0
        while True:
            if self._db.is_sqlite:
                batch = await self._db.read_sqlite(
                    sqlite.read_report_batch(operation_id, after, batch_size, states)
                )
            else:
                batch = await postgres.read_report_batch(
                    self._db, operation_id, after, batch_size, states
                )
            if batch:
                yield batch
            if len(batch) < batch_size:
                return
            after = batch[-1][0]

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The first waiting row (by waiting time, then row number) with that key prefix."""
        if self._db.is_sqlite:
            return await self._db.read_sqlite(sqlite.find_waiting(operation_id, key_prefix))
        return await postgres.find_waiting(self._db, operation_id, key_prefix)

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """End a wait when the row still waits with that key; None otherwise."""
        if self._db.is_sqlite:
            resolver = sqlite.resolve_wait(operation_id, row_number, signal_key, outcome)
            return await self._db.write_sqlite(resolver)
        return await postgres.resolve_wait(self._db, operation_id, row_number, signal_key, outcome)

    async def resolve_first_waiting(
        self, operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
    ) -> RowRecord | None:
        """End the wait of the first row waiting under the key prefix, in one transaction."""
        if self._db.is_sqlite:
            resolver = sqlite.resolve_first_waiting(operation_id, key_prefix, outcome)
            return await self._db.write_sqlite(resolver)
        return await postgres.resolve_first_waiting(self._db, operation_id, key_prefix, outcome)
