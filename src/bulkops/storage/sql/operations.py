"""OperationStore on SQLAlchemy Core: every status change is one conditional UPDATE."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    RowMapping,
    case,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.records import OperationQuery, OperationRecord, Page
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.fastread import operation_reader
from bulkops.storage.sql.schema import operations, row_records
from bulkops.storage.sql.types import UtcDateTime
from bulkops.storage.states import (
    CLAIMABLE_STATUSES,
    OperationStatus,
    RowState,
    allowed_sources,
)

_FIELDS = tuple(f.name for f in fields(OperationRecord))


def operation_values(record: OperationRecord) -> dict[str, Any]:
    """Column values of a record (column names equal field names)."""
    return {name: getattr(record, name) for name in _FIELDS}


def operation_from_row(row: RowMapping) -> OperationRecord:
    """The record stored in an ``operations`` row."""
    return OperationRecord(**{name: row[name] for name in _FIELDS})


def check_paging(page: int, page_size: int) -> None:
    """Refuse paging values that cannot select a page."""
    if page < 1 or page_size < 1:
        raise ValueError(f"page and page_size must be at least 1, got {page} and {page_size}")


def _utc(value: datetime) -> ColumnElement[datetime]:
    # A typed literal so the value goes through UtcDateTime inside SQL expressions.
    return literal(value, UtcDateTime())


class OperationMethods:
    """The OperationStore half of ``SqlStore``."""

    _db: Database

    async def ping(self) -> None:
        """Raise ``StorageError`` when the database is unreachable."""
        async with self._db.read() as conn:
            await conn.execute(select(literal(1)))

    async def add(self, record: OperationRecord) -> None:
        """Insert a new operation record."""
        async with self._db.write() as conn:
            await conn.execute(operations.insert().values(**operation_values(record)))

    async def _get_operation(self, operation_id: UUID) -> OperationRecord | None:
        if self._db.has_sqlite_writer:
            return await self._db.read_sqlite(operation_reader(operation_id))
        async with self._db.read() as conn:
            return await _fetch(conn, operation_id)

    async def list(self, query: OperationQuery) -> Page[OperationRecord]:
        """A page of matching records, newest ``created_at`` first, then by id."""
        check_paging(query.page, query.page_size)
        c = operations.c
        conditions: builtins.list[ColumnElement[bool]] = []
        if query.operation_name is not None:
            conditions.append(func.lower(c.operation_name) == query.operation_name.lower())
        if query.created_by is not None:
            conditions.append(func.lower(c.created_by) == query.created_by.lower())
        if query.status is not None:
            conditions.append(c.status == query.status)
        if query.created_from is not None:
            conditions.append(c.created_at >= query.created_from)
        if query.created_to is not None:
            conditions.append(c.created_at <= query.created_to)
        count = select(func.count()).select_from(operations).where(*conditions)
        items = (
            select(operations)
            .where(*conditions)
            .order_by(c.created_at.desc(), c.id)
            .limit(query.page_size)
            .offset((query.page - 1) * query.page_size)
        )
        async with self._db.read() as conn:
            total = (await conn.execute(count)).scalar_one()
            rows = (await conn.execute(items)).mappings().all()
        return Page(
            items=[operation_from_row(row) for row in rows],
            total_count=total,
            page=query.page,
            page_size=query.page_size,
        )

    async def claimable(self, limit: int) -> Sequence[OperationRecord]:
        """Up to ``limit`` Pending or Retrying operations, oldest first."""
        if limit < 1:
            return []
        stmt = (
            select(operations)
            .where(operations.c.status.in_(sorted(CLAIMABLE_STATUSES)))
            .order_by(operations.c.created_at, operations.c.id)
            .limit(limit)
        )
        return await self._select_operations(stmt)

    async def claim(
        self, operation_id: UUID, version: int, worker_id: str, now: datetime
    ) -> OperationRecord | None:
        """Move a claimable operation whose token is ``version`` to Running."""
        c = operations.c
        stmt = (
            update(operations)
            .where(
                c.id == operation_id, c.version == version, c.status.in_(sorted(CLAIMABLE_STATUSES))
            )
            .values(
                status=OperationStatus.RUNNING,
                version=c.version + 1,
                worker_id=worker_id,
                heartbeat_at=now,
                started_at=func.coalesce(c.started_at, _utc(now)),
            )
        )
        return await self._update_and_fetch(operation_id, stmt)

    async def transition(
        self,
        operation_id: UUID,
        target: OperationStatus,
        now: datetime,
        *,
        error_message: str | None = None,
        expected_version: int | None = None,
    ) -> OperationRecord | None:
        """Change the status when the transition table allows it from the current one."""
        sources = allowed_sources(target)
        if not sources:
            return None
        c = operations.c
        values: dict[str, Any] = {"status": target, "version": c.version + 1}
        if target.is_terminal:
            values["completed_at"] = now
        if target is OperationStatus.PENDING:
            values["worker_id"] = None
            values["heartbeat_at"] = None
        if error_message is not None:
            values["error_message"] = error_message
        stmt = update(operations).where(c.id == operation_id, c.status.in_(sorted(sources)))
        if expected_version is not None:
            stmt = stmt.where(c.version == expected_version)
        return await self._update_and_fetch(operation_id, stmt.values(**values))

    async def set_total_rows(self, operation_id: UUID, total_rows: int) -> None:
        """Record how many data rows the file holds."""
        stmt = (
            update(operations).where(operations.c.id == operation_id).values(total_rows=total_rows)
        )
        async with self._db.write() as conn:
            await conn.execute(stmt)

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        """Renew ``heartbeat_at`` of the Running operations this worker holds."""
        if not operation_ids:
            return
        c = operations.c
        stmt = (
            update(operations)
            .where(
                c.id.in_(builtins.list(operation_ids)),
                c.worker_id == worker_id,
                c.status == OperationStatus.RUNNING,
            )
            .values(heartbeat_at=now)
        )
        async with self._db.write() as conn:
            await conn.execute(stmt)

    async def running(self) -> Sequence[OperationRecord]:
        """Every Running operation, oldest first."""
        stmt = (
            select(operations)
            .where(operations.c.status == OperationStatus.RUNNING)
            .order_by(operations.c.created_at, operations.c.id)
        )
        return await self._select_operations(stmt)

    async def recount(self, operation_id: UUID) -> OperationRecord | None:
        """Recompute processed, successful and error counters from the stored row states."""
        r = row_records.c
        completed = func.sum(case((r.state == RowState.COMPLETED, 1), else_=0))
        failed = func.sum(case((r.state == RowState.FAILED, 1), else_=0))
        counts = select(func.coalesce(completed, 0), func.coalesce(failed, 0)).where(
            r.operation_id == operation_id,
            r.state.in_((RowState.COMPLETED, RowState.FAILED)),
        )
        async with self._db.write() as conn:
            done, bad = (await conn.execute(counts)).one()
            stmt = (
                update(operations)
                .where(operations.c.id == operation_id)
                .values(processed_rows=done + bad, successful_rows=done, error_count=bad)
            )
            if (await conn.execute(stmt)).rowcount == 0:
                return None
            return await _fetch(conn, operation_id)

    async def _update_and_fetch(self, operation_id: UUID, stmt: Any) -> OperationRecord | None:
        # rowcount decides who won; the re-read happens inside the same transaction.
        async with self._db.write() as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                return None
            return await _fetch(conn, operation_id)

    async def _select_operations(self, stmt: Any) -> Sequence[OperationRecord]:
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [operation_from_row(row) for row in rows]


async def _fetch(conn: AsyncConnection, operation_id: UUID) -> OperationRecord | None:
    stmt = select(operations).where(operations.c.id == operation_id)
    row = (await conn.execute(stmt)).mappings().one_or_none()
    return None if row is None else operation_from_row(row)
