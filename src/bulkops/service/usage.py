"""Who used how much: each tenant's operations, rows and stored bytes by day, and the
rows-per-day quota a create is held to (``BULKOPS_TENANT_MAX_ROWS_PER_DAY``)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from bulkops.clock import utcnow
from bulkops.errors import TooManyRequests
from bulkops.storage.ports import OperationStore
from bulkops.storage.records import OperationQuery, OperationRecord

USAGE_DAYS = 30  # GET /api/usage covers the last 30 days, today included
QUOTA_WINDOW = timedelta(hours=24)
_PAGE = 1000


@dataclass(frozen=True, slots=True)
class UsageDay:
    """One tenant's use on one UTC day (by the day its operations were created).

    Attributes:
        tenant: The operations' tenant; None for operations created without one.
        day: The UTC day.
        operations_created: Operations created that day.
        rows_submitted: Their data rows (as counted; an operation not counted yet: 0).
        rows_processed: Their rows processed so far (retries included once per row).
        bytes_stored: The bytes of their stored files (as uploaded, compressed or not).
    """

    tenant: str | None
    day: date
    operations_created: int = 0
    rows_submitted: int = 0
    rows_processed: int = 0
    bytes_stored: int = 0


async def created_since(
    operations: OperationStore, since: datetime, tenant: str | None = None
) -> AsyncIterator[OperationRecord]:
    """The operations created at ``since`` or later (only ``tenant``'s when given)."""
    page = 1
    while True:
        query = OperationQuery(page=page, page_size=_PAGE, created_from=since, tenant=tenant)
        found = await operations.list(query)
        for record in found.items:
            yield record
        if len(found.items) < _PAGE:
            return
        page += 1


class UsageService:
    """``GET /api/usage``: each tenant's use by day."""

    def __init__(self, operations: OperationStore) -> None:
        self._operations = operations

    async def usage(self, tenant: str | None = None, now: datetime | None = None) -> list[UsageDay]:
        """Use by tenant and UTC day over the last ``USAGE_DAYS`` days (today included),
        newest day first, then by tenant; only ``tenant``'s when given (a tenant's
        principal sees its own). Days without operations are left out."""
        today = (now or utcnow()).date()
        first = today - timedelta(days=USAGE_DAYS - 1)
        since = datetime(first.year, first.month, first.day, tzinfo=(now or utcnow()).tzinfo)
        days: dict[tuple[str | None, date], list[int]] = {}
        async for record in created_since(self._operations, since, tenant):
            counts = days.setdefault((record.tenant, record.created_at.date()), [0, 0, 0, 0])
            counts[0] += 1
            counts[1] += record.total_rows
            counts[2] += record.processed_rows
            counts[3] += record.file_size
        ordered = sorted(days.items(), key=lambda item: (-item[0][1].toordinal(), item[0][0] or ""))
        return [UsageDay(key[0], key[1], *values) for key, values in ordered]


@dataclass(frozen=True, slots=True)
class RowsPerDay:
    """``BULKOPS_TENANT_MAX_ROWS_PER_DAY``: the rows a tenant (else, without one, a
    creator) may submit in any 24 hours.

    A create is refused when the rows of the tenant's operations created in the last 24
    hours and the rows of its own file would pass ``most``. The rows of an operation are
    known once counted: a create counts its own file (so the quota holds at once), and
    stores the count as the operation's total.
    """

    most: int

    async def check(
        self,
        operations: OperationStore,
        tenant: str | None,
        created_by: str,
        rows: int,
        now: datetime,
    ) -> None:
        """Raise ``TooManyRequests`` (with ``Retry-After``: when enough of the window's
        rows leave it) if ``rows`` more would take the tenant past ``most``."""
        since = now - QUOTA_WINDOW
        window: list[tuple[datetime, int]] = []
        async for record in created_since(operations, since, tenant):
            if tenant is None and (record.tenant is not None or record.created_by != created_by):
                continue
            window.append((record.created_at, record.total_rows))
        used = sum(count for _, count in window)
        if used + rows <= self.most:
            return
        owner = f"Tenant {tenant!r}" if tenant is not None else f"Creator {created_by!r}"
        raise TooManyRequests(
            f"{owner} submitted {used} rows in the last 24 hours; {rows} more would pass the "
            f"limit of {self.most} rows per day (BULKOPS_TENANT_MAX_ROWS_PER_DAY)",
            retry_after=_retry_after(window, used + rows - self.most, now),
            limit=self.most,
            used=used,
            rows=rows,
        )


def _retry_after(window: list[tuple[datetime, int]], excess: int, now: datetime) -> int:
    """Seconds until the oldest rows of the window that cover ``excess`` have left it (a
    day when they never can: the file alone passes the limit)."""
    freed = 0
    for created_at, count in sorted(window):
        freed += count
        if freed >= excess:
            return max(1, math.ceil((created_at + QUOTA_WINDOW - now).total_seconds()))
    return int(QUOTA_WINDOW.total_seconds())
