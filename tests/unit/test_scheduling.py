"""The scheduler with a fair share, on memory stores: operations do not wait for each
other, and beyond the bound of operations at once they start in order as others end."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import pytest

from bulkops.definition import Registry
from bulkops.engine import dispatcher as scheduling
from bulkops.engine.fair_share import FairShare
from bulkops.engine.processor import Processor, ProcessorConfig, Stores
from bulkops.engine.scheduler import SchedulerConfig, WorkScheduler
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus
from tests.unit.test_engine import Count, add_operation, stores  # noqa: F401


def fair_scheduler(stores: Stores, worker_count: int = 1) -> WorkScheduler:  # noqa: F811
    config = ProcessorConfig(worker_id="w", flush_rows=10, flush_interval=0.01)
    processor = Processor(Registry([Count]), stores, config, share=FairShare(worker_count))
    return WorkScheduler(processor, SchedulerConfig(worker_count=worker_count))


async def test_more_operations_than_workers_are_all_in_progress_at_once(
    stores: Stores,  # noqa: F811
) -> None:
    records = [await add_operation(stores, rows=300) for _ in range(5)]
    worker = fair_scheduler(stores, worker_count=1)
    most: set[UUID] = set()
    await worker.start()
    deadline = time.monotonic() + 30
    while len(most) < len(records) and not await all_completed(stores, records):
        assert time.monotonic() < deadline, "timed out"
        if len(worker.active) > len(most):
            most = set(worker.active)
        await asyncio.sleep(0)
    await worker.wait_idle()
    await worker.stop()
    assert most == {r.id for r in records}  # one row slot, all in progress at one moment
    assert await all_completed(stores, records)


async def all_completed(stores: Stores, records: list[OperationRecord]) -> bool:  # noqa: F811
    for record in records:
        found = await stores.operations.get(record.id)
        if found is None or found.status is not OperationStatus.COMPLETED:
            return False
    return True


async def test_beyond_the_bound_operations_wait_and_start_in_order(
    stores: Stores,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scheduling, "MAX_OPERATIONS", 2)
    records = [await add_operation(stores, rows=3) for _ in range(5)]
    worker = fair_scheduler(stores)
    await worker.start()
    await worker.wait_idle()
    await worker.stop()
    assert await all_completed(stores, records)
