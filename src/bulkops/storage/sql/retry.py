"""RetryStore on SQL: a retry round is one transaction, its rules from ``lifecycle``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from uuid import UUID

from sqlalchemy import ColumnElement, and_, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage import lifecycle
from bulkops.storage.records import (
    OperationRecord,
    Page,
    RetryRequest,
    RetrySnapshot,
    RetryStart,
    RowRecord,
)
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.bulk import (
    POSTGRES_SPANS_TO_RECORDS,
    SPANS_CLEARED,
    SQLITE_SPANS_TO_RECORDS,
)
from bulkops.storage.sql.codec import operation_from_row, row_from_mapping
from bulkops.storage.sql.deliveries import insert_deliveries
from bulkops.storage.sql.pages import check_paging, count_and_rows, in_states
from bulkops.storage.sql.schema import operations, retry_history, row_fixes, row_records
from bulkops.storage.states import RowState

_BATCH = 2_000  # rows read, reset and written at a time, inside the one transaction
_CHUNK = 5_000  # row numbers per IN list, well under every database's parameter limit


def _snapshot_values(snapshot: RetrySnapshot) -> dict[str, object]:
    return {
        "operation_id": snapshot.operation_id,
        "row_number": snapshot.row_number,
        "attempt": snapshot.attempt,
        "step_index": snapshot.step_index,
        "step_name": snapshot.step_name,
        "error_type": snapshot.error_type,
        "error_message": snapshot.error_message,
        "failed_at": snapshot.failed_at,
    }


async def _qualifying(
    conn: AsyncConnection, request: RetryRequest
) -> AsyncIterator[list[RowRecord]]:
    """The failed rows a retry resets, in batches by row number."""
    r, f = row_records.c, row_fixes.c
    fixed = (
        select(f.row_number)
        .where(f.operation_id == r.operation_id, f.row_number == r.row_number)
        .exists()
    )
    failed: ColumnElement[bool] = and_(
        r.state == RowState.FAILED, or_(r.step_index.in_(request.allowed_steps), fixed)
    )
    base: list[ColumnElement[bool]] = [
        r.operation_id == request.operation_id,
        *in_states((RowState.FAILED,)),
        or_(r.step_index.in_(request.allowed_steps), fixed),
    ]
    if request.include_completed:  # a restart: Completed rows too (not in the state index)
        base = [
            r.operation_id == request.operation_id,
            or_(failed, r.state == RowState.COMPLETED),
        ]
    chunks: list[Sequence[int] | None] = [None]
    if request.row_numbers is not None:
        numbers = sorted(set(request.row_numbers))
        chunks = [numbers[i : i + _CHUNK] for i in range(0, len(numbers), _CHUNK)]
    for chunk in chunks:
        conditions = base if chunk is None else [*base, r.row_number.in_(chunk)]
        after = 0
        while True:
            stmt = (
                select(row_records)
                .where(*conditions, r.row_number > after)
                .order_by(r.row_number)
                .limit(_BATCH)
            )
            rows = [row_from_mapping(m) for m in (await conn.execute(stmt)).mappings().all()]
            if rows:
                yield rows
            if len(rows) < _BATCH:
                break
            after = rows[-1].row_number


async def _spans_to_records(conn: AsyncConnection, operation_id: UUID) -> None:
    """Store the rows of the operation's spans as row records, and drop the spans."""
    postgres = conn.dialect.name == "postgresql"
    key = {"operation_id": operation_id if postgres else str(operation_id)}
    write = POSTGRES_SPANS_TO_RECORDS if postgres else SQLITE_SPANS_TO_RECORDS
    await conn.execute(text(write), key)
    await conn.execute(text(SPANS_CLEARED), key)


class RetryMethods(SqlBase):
    """The RetryStore part of ``SqlStore``."""

    async def begin_retry(self, request: RetryRequest, now: datetime) -> RetryStart | None:
        """Snapshot and reset the qualifying rows and move the operation to Retrying, in
        one transaction; see ``RetryStore.begin_retry``."""
        o = operations.c
        dialect = self._db.dialect
        lookup = dialect.for_update(select(operations).where(o.id == request.operation_id))
        reset = 0
        change = None
        async with self._db.write() as conn:
            found = (await conn.execute(lookup)).mappings().one_or_none()
            if found is None:
                return None
            record = operation_from_row(found)
            if (
                record.status not in lifecycle.retry_sources(request)
                or record.version != request.expected_version
            ):
                return None
            failed = 0
            if request.include_completed:
                await _spans_to_records(conn, request.operation_id)
            async for rows in _qualifying(conn, request):
                # Every row a round resets is kept in the history as it stood (a Completed
                # row a restart runs again, without an error).
                history = [_snapshot_values(lifecycle.retry_snapshot(row)) for row in rows]
                await conn.execute(retry_history.insert(), history)
                failed += sum(1 for row in rows if row.state is RowState.FAILED)
                fresh = [lifecycle.reset_row(request, row) for row in rows]
                await dialect.upsert_rows(conn, request.operation_id, fresh)
                reset += len(rows)
            if reset:
                change = lifecycle.retry_round(record, request, now, failed, reset - failed)
                await conn.execute(
                    update(operations).where(o.id == record.id).values(**change.values)
                )
                await insert_deliveries(conn, change.deliveries)
                if self._events_here:
                    await dialect.insert_events(conn, change.events)
        if change is None:
            return RetryStart(record, 0)
        if not self._events_here:
            await self._after_commit(change.events)
        updated = await self._reread(record.id)
        return None if updated is None else RetryStart(updated, reset)

    async def _reread(self, operation_id: UUID) -> OperationRecord | None:
        async with self._db.read() as conn:
            row = (
                (await conn.execute(select(operations).where(operations.c.id == operation_id)))
                .mappings()
                .one_or_none()
            )
        return None if row is None else operation_from_row(row)

    async def history(
        self, operation_id: UUID, *, row_number: int | None, page: int, page_size: int
    ) -> Page[RetrySnapshot]:
        """Retry history entries by row number, then attempt."""
        check_paging(page, page_size)
        h = retry_history.c
        conditions: list[ColumnElement[bool]] = [h.operation_id == operation_id]
        if row_number is not None:
            conditions.append(h.row_number == row_number)
        count = select(func.count()).select_from(retry_history).where(*conditions)
        items = (
            select(retry_history)
            .where(*conditions)
            .order_by(h.row_number, h.attempt, h.id)
            .limit(page_size)
            .offset((page - 1) * page_size)
        )
        total, found = await self._db.read_core(count_and_rows(count, items))
        entries = [
            RetrySnapshot(
                operation_id=row["operation_id"],
                row_number=row["row_number"],
                attempt=row["attempt"],
                step_index=row["step_index"],
                step_name=row["step_name"],
                error_type=row["error_type"],
                error_message=row["error_message"],
                failed_at=row["failed_at"],
            )
            for row in found
        ]
        return Page(entries, total, page, page_size)
