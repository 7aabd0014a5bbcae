"""RetryStore on SQLAlchemy Core: a retry round is one set-based transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from sqlalchemy import ColumnElement, func, insert, select, update

from bulkops.storage.records import (
    OperationRecord,
    Page,
    RetryRequest,
    RetrySnapshot,
    RetryStart,
)
from bulkops.storage.sql.operations import check_paging
from bulkops.storage.sql.schema import operations, retry_history, row_records
from bulkops.storage.states import OperationStatus, RowState

if TYPE_CHECKING:
    from bulkops.storage.sql.database import Database

_CHUNK = 5_000  # row numbers per statement, well under every database's parameter limit


class _NothingToRetry(Exception):
    """Rolls the transaction back when no row qualifies."""


def _row_conditions(
    request: RetryRequest, numbers: Sequence[int] | None
) -> list[ColumnElement[bool]]:
    r = row_records.c
    conditions = [
        r.operation_id == request.operation_id,
        r.state == RowState.FAILED,
        r.step_index.in_(request.allowed_steps),
    ]
    if numbers is not None:
        conditions.append(r.row_number.in_(numbers))
    return conditions


class RetryMethods:
    """The RetryStore part of ``SqlStore``."""

    _db: Database

    async def begin_retry(self, request: RetryRequest, now: datetime) -> RetryStart | None:
        """Snapshot and reset the qualifying rows and move the operation to Retrying, in
        one transaction; see ``RetryStore.begin_retry``."""
        o, r = operations.c, row_records.c
        if request.row_numbers is None:
            chunks: list[Sequence[int] | None] = [None]
        else:
            numbers = sorted(set(request.row_numbers))
            chunks = [numbers[i : i + _CHUNK] for i in range(0, len(numbers), _CHUNK)]
        start_retry = (
            update(operations)
            .where(
                o.id == request.operation_id,
                o.version == request.expected_version,
                o.status == OperationStatus.COMPLETED_WITH_ERRORS,
            )
            .values(
                status=OperationStatus.RETRYING,
                retry_count=o.retry_count + 1,
                version=o.version + 1,
                completed_at=None,
                error_message=None,
            )
        )
        reset = 0
        try:
            async with self._db.write() as conn:
                if (await conn.execute(start_retry)).rowcount == 0:
                    return None
                for chunk in chunks:
                    conditions = _row_conditions(request, chunk)
                    snapshot = select(
                        r.operation_id,
                        r.row_number,
                        r.retry_attempt,
                        r.step_index,
                        r.step_name,
                        r.error_type,
                        r.error_message,
                        r.completed_at,
                    ).where(*conditions)
                    await conn.execute(
                        insert(retry_history).from_select(
                            [
                                "operation_id",
                                "row_number",
                                "attempt",
                                "step_index",
                                "step_name",
                                "error_type",
                                "error_message",
                                "failed_at",
                            ],
                            snapshot,
                        )
                    )
                    result = await conn.execute(
                        update(row_records)
                        .where(*conditions)
                        .values(
                            state=RowState.PENDING,
                            retry_attempt=r.retry_attempt + 1,
                            error_type=None,
                            error_message=None,
                            completed_at=None,
                        )
                    )
                    reset += result.rowcount
                if reset == 0:
                    raise _NothingToRetry
        except _NothingToRetry:
            current = await self._get_operation(request.operation_id)
            return None if current is None else RetryStart(current, 0)
        updated = await self._get_operation(request.operation_id)
        return None if updated is None else RetryStart(updated, reset)

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
        async with self._db.read() as conn:
            total = (await conn.execute(count)).scalar_one()
            found = (await conn.execute(items)).mappings().all()
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

    if TYPE_CHECKING:  # provided by OperationMethods in SqlStore

        async def _get_operation(self, operation_id: UUID) -> OperationRecord | None: ...
