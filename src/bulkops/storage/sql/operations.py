"""OperationStore on SQLAlchemy Core: every change is one conditional UPDATE with its events."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.lifecycle import HELD_STATUSES, OperationChange, RowCounts
from bulkops.storage.records import (
    ActiveLimit,
    EventRecord,
    IdempotencyKey,
    KeyInUse,
    LimitReached,
    OperationQuery,
    OperationRecord,
    Page,
    UndoRefused,
)
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.codec import operation_from_row, operation_values
from bulkops.storage.sql.deliveries import insert_deliveries
from bulkops.storage.sql.dialect import Dialect
from bulkops.storage.sql.keys import claim_key, find_key
from bulkops.storage.sql.pages import check_paging, count_and_rows, in_states
from bulkops.storage.sql.schema import not_completed, operations, row_records, row_spans
from bulkops.storage.states import TERMINAL_STATUSES, OperationStatus, RowState

_o = operations.c
_CLAIMABLE = or_(
    _o.status == OperationStatus.PENDING,
    and_(_o.status == OperationStatus.RETRYING, _o.worker_id.is_(None)),
)
ACTIVE_STATUSES = (OperationStatus.PENDING, OperationStatus.RUNNING, OperationStatus.RETRYING)


class _Refused(Exception):
    """Rolls an add back (its idempotency key included) when the active limit refuses it."""

    def __init__(self, reached: LimitReached) -> None:
        super().__init__(f"{reached.active} active")
        self.reached = reached


async def _check_active(
    dialect: Dialect, conn: AsyncConnection, record: OperationRecord, most: int
) -> None:
    """Raise ``_Refused`` when the record's tenant already has ``most`` active operations.

    On PostgreSQL a transaction lock per tenant orders concurrent adds of one tenant, so
    each counts the ones committed before it; SQLite's writers are serialised already.
    """
    if record.tenant is not None:
        key, owner = f"tenant:{record.tenant}", _o.tenant == record.tenant
    else:
        key = f"creator:{record.created_by}"
        owner = and_(_o.tenant.is_(None), _o.created_by == record.created_by)
    await dialect.serialise(conn, key)
    # A tenant's count reads its (tenant, status) index; a creator's, the status index (few
    # operations are active at any time).
    count = select(func.count()).where(_o.status.in_(ACTIVE_STATUSES), owner)
    active = int((await conn.execute(count)).scalar_one())
    if active >= most:
        raise _Refused(LimitReached(active))


class OperationMethods(SqlBase):
    """The OperationStore half of ``SqlStore``."""

    async def ping(self) -> None:
        """Raise ``StorageError`` when the database is unreachable."""
        async with self._db.read() as conn:
            await conn.execute(select(literal(1)))

    async def add(
        self,
        record: OperationRecord,
        events: Sequence[EventRecord] = (),
        *,
        idempotency: IdempotencyKey | None = None,
        limit: ActiveLimit | None = None,
    ) -> KeyInUse | LimitReached | None:
        """Insert a new operation record and its events in one transaction, unless the
        idempotency key was used or the active limit refuses it (see
        ``OperationStore.add``)."""
        try:
            async with self._db.write() as conn:
                if idempotency is not None:
                    used = await claim_key(
                        self._db.dialect, conn, idempotency, record.id, record.created_at
                    )
                    if used is not None:
                        return used
                if limit is not None:
                    await _check_active(self._db.dialect, conn, record, limit.most)
                await conn.execute(operations.insert().values(**operation_values(record)))
                if self._events_here:
                    await self._db.dialect.insert_events(conn, events)
        except _Refused as refused:
            return refused.reached
        if not self._events_here:
            await self._after_commit(events)
        return None

    async def key_in_use(self, key: IdempotencyKey) -> KeyInUse | None:
        """The principal's unexpired use of ``key`` (see ``OperationStore.key_in_use``)."""
        async with self._db.read() as conn:
            return await find_key(conn, key)

    async def add_undo(
        self,
        record: OperationRecord,
        events: Sequence[EventRecord] = (),
        *,
        limit: ActiveLimit | None = None,
    ) -> UndoRefused | LimitReached | None:
        """Insert the undo operation ``record`` and name it on the operation it undoes, in
        one transaction (see ``OperationStore.add_undo``)."""
        if record.undo_of is None:
            raise ValueError("an undo operation names the operation it undoes (undo_of)")
        # The conditional UPDATE decides which of two concurrent undos wins.
        mark = (
            update(operations)
            .where(
                _o.id == record.undo_of,
                _o.undone_by.is_(None),
                _o.status.in_(sorted(TERMINAL_STATUSES)),
            )
            .values(undone_by=record.id)
        )
        try:
            async with self._db.write() as conn:
                if limit is not None:
                    await _check_active(self._db.dialect, conn, record, limit.most)
                if (await conn.execute(mark)).rowcount == 0:
                    return UndoRefused(await _fetch(conn, record.undo_of))
                await conn.execute(operations.insert().values(**operation_values(record)))
                if self._events_here:
                    await self._db.dialect.insert_events(conn, events)
        except _Refused as refused:
            return refused.reached
        if not self._events_here:
            await self._after_commit(events)
        return None

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        """The operation record, or None when unknown."""
        return await self._db.dialect.get_operation(operation_id)

    async def list(self, query: OperationQuery) -> Page[OperationRecord]:
        """A page of matching records, newest ``created_at`` first, then by id."""
        check_paging(query.page, query.page_size)
        conditions: builtins.list[ColumnElement[bool]] = []
        if query.operation_name is not None:
            conditions.append(func.lower(_o.operation_name) == query.operation_name.lower())
        if query.created_by is not None:
            conditions.append(func.lower(_o.created_by) == query.created_by.lower())
        if query.status is not None:
            conditions.append(_o.status == query.status)
        if query.created_from is not None:
            conditions.append(_o.created_at >= query.created_from)
        if query.created_to is not None:
            conditions.append(_o.created_at <= query.created_to)
        if query.tenant is not None:
            conditions.append(_o.tenant == query.tenant)
        if query.file_sha256 is not None:
            conditions.append(_o.file_sha256 == query.file_sha256)
        count = select(func.count()).select_from(operations).where(*conditions)
        items = (
            select(operations)
            .where(*conditions)
            .order_by(_o.created_at.desc(), _o.id)
            .limit(query.page_size)
            .offset((query.page - 1) * query.page_size)
        )
        counted = count_and_rows(count, items)

        def read(conn: Connection) -> tuple[int, builtins.list[OperationRecord]]:
            total, rows = counted(conn)  # decoded on the reading thread, off the loop
            return total, [operation_from_row(row) for row in rows]

        total, records = await self._db.read_core(read)
        return Page(
            items=records,
            total_count=total,
            page=query.page,
            page_size=query.page_size,
        )

    async def claimable(self, limit: int) -> Sequence[OperationRecord]:
        """Up to ``limit`` Pending operations and unheld Retrying ones, highest priority
        first, then oldest first."""
        if limit < 1:
            return []
        order = (_o.priority.desc(), _o.created_at, _o.id)
        stmt = select(operations).where(_CLAIMABLE).order_by(*order).limit(limit)
        return await self._select(stmt)

    async def status_counts(self, tenant: str | None = None) -> dict[OperationStatus, int]:
        """Operations per status (read from the status index); with ``tenant``, that
        tenant's."""
        stmt = select(_o.status, func.count()).group_by(_o.status)
        if tenant is not None:
            stmt = stmt.where(_o.tenant == tenant)
        async with self._db.read() as conn:
            found = (await conn.execute(stmt)).all()
        return {OperationStatus(status): int(count) for status, count in found}

    async def abandoned(self, stale_before: datetime, limit: int) -> Sequence[OperationRecord]:
        """Held operations whose heartbeat is older than ``stale_before``."""
        if limit < 1:
            return []
        stmt = (
            select(operations)
            .where(
                _o.status.in_(sorted(HELD_STATUSES)),
                _o.worker_id.is_not(None),
                or_(_o.heartbeat_at.is_(None), _o.heartbeat_at < stale_before),
            )
            .order_by(_o.heartbeat_at, _o.id)
            .limit(limit)
        )
        return await self._select(stmt)

    async def running(self) -> Sequence[OperationRecord]:
        """Every Running operation, oldest first."""
        stmt = (
            select(operations)
            .where(_o.status == OperationStatus.RUNNING)
            .order_by(_o.created_at, _o.id)
        )
        return await self._select(stmt)

    async def apply(self, change: OperationChange) -> OperationRecord | None:
        """Persist a change and its events when the token still matches."""
        stmt = (
            update(operations)
            .where(_o.id == change.operation_id, _o.version == change.expected_version)
            .values(**change.values)
        )
        async with self._db.write() as conn:
            # rowcount decides who won; the re-read happens inside the same transaction.
            if (await conn.execute(stmt)).rowcount == 0:
                return None
            await insert_deliveries(conn, change.deliveries)
            if self._events_here:
                await self._db.dialect.insert_events(conn, change.events)
            record = await _fetch(conn, change.operation_id)
        if not self._events_here:
            await self._after_commit(change.events)
        return record

    async def counts(self, operation_id: UUID) -> RowCounts:
        """Completed and Failed rows of the operation.

        Completed rows are not in the state index: they are the operation's stored rows
        (counted on the primary key) less the others (grouped by state on the index), and
        the rows of its spans.
        """
        r, s = row_records.c, row_spans.c
        every = select(func.count()).where(r.operation_id == operation_id)
        others = (
            select(r.state, func.count())
            .where(r.operation_id == operation_id, not_completed())
            .group_by(r.state)
        )
        spans = select(func.coalesce(func.sum(s.last_row - s.first_row + 1), 0)).where(
            s.operation_id == operation_id
        )
        async with self._db.read() as conn:
            total = (await conn.execute(every)).scalar_one()
            by_state = {RowState(state): count for state, count in await conn.execute(others)}
            spanned = (await conn.execute(spans)).scalar_one()
        return RowCounts(
            completed=int(total) - sum(by_state.values()) + int(spanned),
            failed=int(by_state.get(RowState.FAILED, 0)),
        )

    async def failed_rows(self, operation_id: UUID) -> int:
        """Failed rows of the operation, on the state index."""
        r = row_records.c
        stmt = select(func.count()).where(
            r.operation_id == operation_id, *in_states((RowState.FAILED,))
        )
        async with self._db.read() as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def set_total_rows(self, operation_id: UUID, total_rows: int) -> None:
        """Record how many data rows the file holds (not once its status is final)."""
        final = [status.value for status in TERMINAL_STATUSES]
        stmt = (
            update(operations)
            .where(_o.id == operation_id, _o.status.not_in(final))
            .values(total_rows=total_rows)
        )
        async with self._db.write() as conn:
            await conn.execute(stmt)

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        """Renew ``heartbeat_at`` of the held operations this worker holds."""
        if not operation_ids:
            return
        stmt = (
            update(operations)
            .where(
                _o.id.in_(builtins.list(operation_ids)),
                _o.worker_id == worker_id,
                _o.status.in_(sorted(HELD_STATUSES)),
            )
            .values(heartbeat_at=now)
        )
        async with self._db.write() as conn:
            await conn.execute(stmt)

    async def _select(self, stmt: Any) -> Sequence[OperationRecord]:
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [operation_from_row(row) for row in rows]


async def _fetch(conn: AsyncConnection, operation_id: UUID) -> OperationRecord | None:
    stmt = select(operations).where(_o.id == operation_id)
    row = (await conn.execute(stmt)).mappings().one_or_none()
    return None if row is None else operation_from_row(row)
