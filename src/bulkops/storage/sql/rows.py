"""RowStore on SQLAlchemy Core. ``save`` is the hot path: one executemany upsert per batch."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    RowMapping,
    Select,
    String,
    bindparam,
    cast,
    func,
    literal,
    select,
    update,
)

from bulkops.storage.records import (
    Page,
    ProgressDelta,
    RowQuery,
    RowRecord,
    StepState,
    WaitOutcome,
    resolve_wait,
)
from bulkops.storage.sql.bulk import (
    POSTGRES_RANGE_UPSERT,
    SQLITE_RANGE_UPSERT,
    range_params,
    row_upsert,
    split_plain_runs,
)
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.fastread import batch_reader, wait_resolver, waiting_finder
from bulkops.storage.sql.operations import check_paging
from bulkops.storage.sql.schema import operations, row_records
from bulkops.storage.states import OperationStatus, RowState

_FINAL_STATES = (RowState.COMPLETED, RowState.FAILED)


def row_from_mapping(row: RowMapping) -> RowRecord:
    """The row record stored in a ``row_records`` row."""
    steps = row["steps"]
    return RowRecord(
        operation_id=row["operation_id"],
        row_number=row["row_number"],
        state=row["state"],
        row_id=row["row_id"],
        step_index=row["step_index"],
        step_name=row["step_name"],
        error_type=row["error_type"],
        error_message=row["error_message"],
        retry_attempt=row["retry_attempt"],
        signal_key=row["signal_key"],
        row_data=row["row_data"],
        steps=[StepState.from_json(step) for step in steps] if steps else [],
        waiting_since=row["waiting_since"],
        completed_at=row["completed_at"],
    )


_op = operations.c
# Built once: save() runs for every flushed batch, and building a statement costs as much
# as executing this one.
_ADD_COUNTERS = (
    update(operations)
    .where(_op.id == bindparam("operation_id"))
    .values(
        processed_rows=_op.processed_rows + bindparam("processed"),
        successful_rows=_op.successful_rows + bindparam("successful"),
        error_count=_op.error_count + bindparam("failed"),
    )
)
_STATUS = select(_op.status).where(_op.id == bindparam("operation_id"))


_SQLITE_ADD_COUNTERS = (
    "UPDATE operations SET processed_rows = processed_rows + ?, "
    "successful_rows = successful_rows + ?, error_count = error_count + ? WHERE id = ?"
)
_SQLITE_STATUS = "SELECT status FROM operations WHERE id = ?"


def _sqlite_save(
    operation_id: UUID, rows: Sequence[RowRecord], delta: ProgressDelta
) -> Callable[[sqlite3.Connection], OperationStatus | None]:
    """The whole of ``save`` as one function for the SQLite writer thread."""

    def work(connection: sqlite3.Connection) -> OperationStatus | None:
        key = str(operation_id)
        counters = (delta.processed, delta.successful, delta.failed, key)
        # The operation row is locked first by every writer, so writers never deadlock.
        if connection.execute(_SQLITE_ADD_COUNTERS, counters).rowcount == 0:
            return None
        runs, others = split_plain_runs(rows)
        if runs:
            connection.executemany(SQLITE_RANGE_UPSERT, range_params("sqlite", operation_id, runs))
        if others:
            upsert, params = row_upsert("sqlite", operation_id, others)
            connection.executemany(upsert, params)
        status = connection.execute(_SQLITE_STATUS, (key,)).fetchone()
        return OperationStatus(status[0])

    return work


class RowMethods:
    """The RowStore half of ``SqlStore``."""

    _db: Database

    async def save(
        self, operation_id: UUID, rows: Sequence[RowRecord], delta: ProgressDelta
    ) -> OperationStatus | None:
        """Upsert row records and add ``delta`` to the counters in one transaction.

        Returns the operation's status after the write, or None (nothing written) when the
        operation is unknown.
        """
        if any(row.operation_id != operation_id for row in rows):
            raise ValueError(f"every saved row must belong to operation {operation_id}")
        if self._db.has_sqlite_writer:
            return await self._db.write_sqlite(_sqlite_save(operation_id, rows, delta))
        # Encode before taking the write lock so the lock is held for the SQL alone.
        runs, others = split_plain_runs(rows)
        ranges = range_params("postgresql", operation_id, runs)
        upsert, params = row_upsert(self._db.dialect_name, operation_id, others)
        counts = {
            "operation_id": operation_id,
            "processed": delta.processed,
            "successful": delta.successful,
            "failed": delta.failed,
        }
        async with self._db.write() as conn:
            # The operation row is locked first by every writer, so writers never deadlock.
            if (await conn.execute(_ADD_COUNTERS, counts)).rowcount == 0:
                return None
            if ranges:
                await conn.exec_driver_sql(POSTGRES_RANGE_UPSERT, ranges)
            if others:
                await conn.exec_driver_sql(upsert, params)
            status = await conn.execute(_STATUS, {"operation_id": operation_id})
            result: OperationStatus = status.scalar_one()
        return result

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One row record, or None when unknown."""
        r = row_records.c
        stmt = select(row_records).where(r.operation_id == operation_id, r.row_number == row_number)
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
        return None if row is None else row_from_mapping(row)

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number."""
        check_paging(query.page, query.page_size)
        r = row_records.c
        conditions: builtins.list[ColumnElement[bool]] = [r.operation_id == query.operation_id]
        if query.failed_only:
            conditions.append(r.state == RowState.FAILED)
        if query.state is not None:
            conditions.append(r.state == query.state)
        if query.error_type is not None:
            conditions.append(r.error_type == query.error_type)
        if query.row_number is not None:
            conditions.append(r.row_number == query.row_number)
        if query.step_name is not None:
            conditions.append(r.step_name == query.step_name)
        count = select(func.count()).select_from(row_records).where(*conditions)
        items = (
            select(row_records)
            .where(*conditions)
            .order_by(r.row_number)
            .limit(query.page_size)
            .offset((query.page - 1) * query.page_size)
        )
        async with self._db.read() as conn:
            total = (await conn.execute(count)).scalar_one()
            found = (await conn.execute(items)).mappings().all()
        return Page(
            items=[row_from_mapping(row) for row in found],
            total_count=total,
            page=query.page,
            page_size=query.page_size,
        )

    async def final_row_numbers(self, operation_id: UUID, after: int, limit: int) -> Sequence[int]:
        """Ascending row numbers above ``after`` whose state is Completed or Failed."""
        if limit < 1:
            return []
        r = row_records.c
        stmt = (
            select(r.row_number)
            .where(
                r.operation_id == operation_id,
                r.row_number > after,
                r.state.in_(_FINAL_STATES),
            )
            .order_by(r.row_number)
            .limit(limit)
        )
        async with self._db.read() as conn:
            return builtins.list((await conn.execute(stmt)).scalars().all())

    async def iterate(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        state: RowState | None = None,
    ) -> AsyncIterator[RowRecord]:
        """Every row record by row number, one keyset-paginated batch per transaction.

        No connection is held while the caller consumes a batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if self._db.has_sqlite_writer:
            after = 0
            while True:
                records = await self._db.read_sqlite(
                    batch_reader(operation_id, after, batch_size, state)
                )
                for record in records:
                    yield record
                if len(records) < batch_size:
                    return
                after = records[-1].row_number
        r = row_records.c
        base: Select[Any] = (
            select(row_records)
            .where(r.operation_id == operation_id)
            .order_by(r.row_number)
            .limit(batch_size)
        )
        if state is not None:
            base = base.where(r.state == state)
        last = None
        while True:
            stmt = base if last is None else base.where(r.row_number > last)
            async with self._db.read() as conn:
                batch = (await conn.execute(stmt)).mappings().all()
            for row in batch:
                yield row_from_mapping(row)
            if len(batch) < batch_size:
                return
            last = batch[-1]["row_number"]

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The first waiting row (by waiting time, then row number) with that key prefix."""
        if self._db.has_sqlite_writer:
            return await self._db.read_sqlite(waiting_finder(operation_id, key_prefix))
        r = row_records.c
        escaped = key_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = (
            select(row_records)
            .where(
                r.operation_id == operation_id,
                r.state == RowState.WAITING_FOR_COMPLETION,
                r.signal_key.like(escaped + "%", escape="\\"),
                # The row number closes the key, so a user key that is a prefix of another
                # ("a" and "a:b") never matches the other's rows.
                r.signal_key == literal(key_prefix, String) + cast(r.row_number, String),
            )
            .order_by(r.waiting_since, r.row_number)
            .limit(1)
        )
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
        return None if row is None else row_from_mapping(row)

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """End a wait when the row still waits with that key; None otherwise."""
        if self._db.has_sqlite_writer:
            resolver = wait_resolver(operation_id, row_number, signal_key, outcome)
            return await self._db.write_sqlite(resolver)
        r = row_records.c
        key_matches = r.signal_key.is_(None) if signal_key is None else r.signal_key == signal_key
        conditions = (
            r.operation_id == operation_id,
            r.row_number == row_number,
            r.state == RowState.WAITING_FOR_COMPLETION,
            key_matches,
        )
        lookup = select(row_records).where(*conditions)
        if self._db.dialect_name == "postgresql":
            lookup = lookup.with_for_update()
        async with self._db.write() as conn:
            found = (await conn.execute(lookup)).mappings().one_or_none()
            if found is None:
                return None
            resolved = resolve_wait(row_from_mapping(found), outcome)
            await conn.execute(
                update(row_records)
                .where(*conditions)
                .values(
                    state=resolved.state,
                    step_index=resolved.step_index,
                    error_type=resolved.error_type,
                    error_message=resolved.error_message,
                    completed_at=resolved.completed_at,
                    steps=[step.to_json() for step in resolved.steps] or None,
                )
            )
        return resolved
