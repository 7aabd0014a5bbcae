"""Read use-cases: operations, their rows, files and status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from bulkops.errors import NotFound
from bulkops.storage.ports import DeliveryStore, FileStore, OperationStore, RowStore
from bulkops.storage.records import (
    DeliveryRecord,
    OperationQuery,
    OperationRecord,
    Page,
    RowQuery,
    RowRecord,
)
from bulkops.storage.states import ErrorType, OperationStatus, RowState

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 25


def clamp_paging(page: int | None, page_size: int | None) -> tuple[int, int]:
    """Page (at least 1) and page size (1..1000, default 25)."""
    size = DEFAULT_PAGE_SIZE if page_size is None else min(max(page_size, 1), MAX_PAGE_SIZE)
    return max(page or 1, 1), size


@dataclass(frozen=True, slots=True)
class OperationProgress:
    """Status and progress of one operation."""

    status: OperationStatus
    processed_rows: int
    total_rows: int
    error_count: int
    completed_at: datetime | None
    progress: int

    @classmethod
    def of(cls, record: OperationRecord) -> OperationProgress:
        """Build from a record; progress is floor(processed*100/total), 0 when total is 0."""
        total, processed = record.total_rows, record.processed_rows
        progress = min(processed * 100 // total, 100) if total > 0 else 0
        return cls(
            status=record.status,
            processed_rows=processed,
            total_rows=total,
            error_count=record.error_count,
            completed_at=record.completed_at,
            progress=progress,
        )


class QueryService:
    """Lists and looks up operations, rows and files."""

    def __init__(
        self,
        operations: OperationStore,
        rows: RowStore,
        files: FileStore,
        deliveries: DeliveryStore | None = None,
    ) -> None:
        self._operations = operations
        self._rows = rows
        self._files = files
        self._deliveries = deliveries

    async def notifications(self, operation_id: UUID) -> Sequence[DeliveryRecord]:
        """The notification deliveries of an operation and how each went."""
        await self.get(operation_id)  # NotFound for an unknown operation
        if self._deliveries is None:
            return []
        return await self._deliveries.deliveries(operation_id)

    async def get(self, operation_id: UUID, *, tenant: str | None = None) -> OperationRecord:
        """The operation, or ``NotFound``; with ``tenant``, ``NotFound`` too for another
        tenant's operation (as if it did not exist: the caller learns nothing of it)."""
        record = await self._operations.get(operation_id)
        if record is None or (tenant is not None and record.tenant != tenant):
            raise NotFound(f"Operation {operation_id} not found")
        return record

    async def list(self, query: OperationQuery) -> Page[OperationRecord]:
        """A page of operations, newest first."""
        return await self._operations.list(query)

    async def status(self, operation_id: UUID) -> OperationProgress:
        """Status and progress."""
        return OperationProgress.of(await self.get(operation_id))

    async def fixed_among(self, operation_id: UUID, rows: Sequence[RowRecord]) -> set[int]:
        """The numbers of ``rows`` whose data was fixed in place (only rows that keep their
        data can be: the others cost no look-up)."""
        numbers = [row.row_number for row in rows if row.row_data is not None]
        if not numbers:
            return set()
        return set(await self._rows.fixes(operation_id, row_numbers=numbers))

    async def originals_among(
        self,
        operation_id: UUID,
        rows: Sequence[RowRecord],
        fixed: Collection[int] | None = None,
    ) -> dict[int, dict[str, Any]]:
        """The data before their first fix of those of ``rows`` that were fixed in place
        (when ``fixed`` is known, only those numbers are looked up)."""
        numbers = [row.row_number for row in rows if row.row_data is not None]
        if fixed is not None:
            numbers = [number for number in numbers if number in fixed]
        if not numbers:
            return {}
        return await self._rows.originals(operation_id, numbers)

    async def errors(
        self,
        operation_id: UUID,
        *,
        page: int | None = None,
        page_size: int | None = None,
        error_type: str | None = None,
        row_number: int | None = None,
        after: int | None = None,
    ) -> Page[RowRecord]:
        """Failed rows; an unknown ``error_type`` is ignored. With ``after``, the page of
        rows numbered above it (keyset paging)."""
        return await self._page(
            operation_id,
            page,
            page_size,
            failed_only=True,
            error_type=ErrorType.parse(error_type) if error_type else None,
            row_number=row_number,
            after=after,
        )

    async def rows(
        self,
        operation_id: UUID,
        *,
        page: int | None = None,
        page_size: int | None = None,
        state: str | None = None,
        step_name: str | None = None,
        after: int | None = None,
    ) -> Page[RowRecord]:
        """Per-row progress; an unknown ``state`` is ignored. With ``after``, the page of
        rows numbered above it (keyset paging)."""
        return await self._page(
            operation_id,
            page,
            page_size,
            state=RowState.parse(state) if state else None,
            step_name=step_name or None,
            after=after,
        )

    async def _page(
        self,
        operation_id: UUID,
        page: int | None,
        page_size: int | None,
        **filters: Any,
    ) -> Page[RowRecord]:
        number, size = clamp_paging(page, page_size)
        query = RowQuery(operation_id=operation_id, page=number, page_size=size, **filters)
        # The page and the operation's look-up run at once (on SQLite, on two threads): a
        # read of an unknown operation finds no rows, and answers NotFound all the same.
        known = asyncio.ensure_future(self.get(operation_id))
        try:
            found = await self._rows.page(query)
        finally:
            await known  # NotFound for an unknown operation
        return found

    async def file(self, operation_id: UUID) -> tuple[OperationRecord, AsyncIterator[bytes]]:
        """The record and a stream of the original file's bytes."""
        record = await self.get(operation_id)
        return record, self._files.read(record.file_id)
