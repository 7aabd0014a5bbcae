"""The rows-per-day quota and the usage by day, on the memory store."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from bulkops.errors import TooManyRequests
from bulkops.service.usage import RowsPerDay, UsageService
from bulkops.storage.memory import MemoryEventStore, MemoryStore
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _operation(hours_ago: float, rows: int, tenant: str | None, by: str = "ann") -> OperationRecord:
    return OperationRecord(
        id=uuid.uuid4(),
        operation_name="import",
        status=OperationStatus.COMPLETED,
        created_by=by,
        created_at=NOW - timedelta(hours=hours_ago),
        source="tests",
        file_id=str(uuid.uuid4()),
        file_name="rows.csv",
        file_size=100,
        file_format="csv",
        metadata={},
        total_rows=rows,
        processed_rows=rows,
        tenant=tenant,
    )


async def _store(*records: OperationRecord) -> MemoryStore:
    store = MemoryStore(MemoryEventStore())
    for record in records:
        await store.add(record, [])
    return store


async def test_the_quota_counts_the_last_24_hours_of_the_tenant_only() -> None:
    store = await _store(
        _operation(30, 1000, "acme"),  # outside the window
        _operation(20, 40, "acme"),
        _operation(2, 50, "acme"),
        _operation(1, 900, "globex"),
        _operation(1, 900, None),
    )
    quota = RowsPerDay(100)
    await quota.check(store, "acme", "ann", 10, NOW)  # 90 + 10: at the limit
    with pytest.raises(TooManyRequests) as refused:
        await quota.check(store, "acme", "ann", 11, NOW)
    # 1 row too many: the oldest operation of the window frees it 4 hours from now.
    assert refused.value.retry_after == 4 * 3600
    assert refused.value.extra["used"] == 90 and refused.value.extra["limit"] == 100
    # Enough only once both have left: 22 hours from now.
    with pytest.raises(TooManyRequests) as later:
        await quota.check(store, "acme", "ann", 60, NOW)
    assert later.value.retry_after == 22 * 3600
    with pytest.raises(TooManyRequests) as never:
        await quota.check(store, "acme", "ann", 101, NOW)  # the file alone passes it
    assert never.value.retry_after == 24 * 3600


async def test_without_a_tenant_the_creator_is_held_to_the_quota() -> None:
    store = await _store(_operation(1, 90, None, by="ann"), _operation(1, 90, None, by="bob"))
    await RowsPerDay(100).check(store, None, "ann", 10, NOW)
    with pytest.raises(TooManyRequests, match="Creator 'ann'"):
        await RowsPerDay(100).check(store, None, "ann", 11, NOW)


async def test_usage_by_tenant_and_day_over_30_days() -> None:
    store = await _store(
        _operation(1, 10, "acme"),
        _operation(2, 5, "acme"),
        _operation(25, 7, "acme"),
        _operation(1, 3, None),
        _operation(24 * 31, 99, "acme"),  # older than 30 days
    )
    days = await UsageService(store).usage(now=NOW)
    assert [
        (d.tenant, d.day.isoformat(), d.operations_created, d.rows_submitted) for d in days
    ] == [
        (None, "2026-11-28", 1, 3),
        ("acme", "2026-11-28", 2, 15),
        ("acme", "2026-11-27", 1, 7),
    ]
    assert days[1].bytes_stored == 200 and days[1].rows_processed == 15
    only = await UsageService(store).usage("acme", now=NOW)
    assert {d.tenant for d in only} == {"acme"}
