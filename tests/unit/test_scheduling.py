"""The scheduler with a fair share, on memory stores: operations do not wait for each
other, and beyond the bound of operations at once they start in order as others end."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import pytest

import bulkops as bo
from bulkops.definition import Registry
from bulkops.engine import dispatcher as scheduling
from bulkops.engine.fair_share import FairShare
from bulkops.engine.processor import Processor, ProcessorConfig, Stores
from bulkops.engine.scheduler import SchedulerConfig, WorkScheduler
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus
from tests.unit.test_engine import Count, Item, Meta, add_operation, stores  # noqa: F401


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


GATE = asyncio.Event()


@bo.operation("gated")
class Gated(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        await GATE.wait()


def gated_scheduler(stores: Stores, name: str) -> WorkScheduler:  # noqa: F811
    config = ProcessorConfig(worker_id=name, flush_rows=10, flush_interval=0.01)
    processor = Processor(Registry([Gated]), stores, config, share=FairShare(1))
    return WorkScheduler(processor, SchedulerConfig(worker_count=1))


async def test_new_operations_go_to_the_process_that_holds_fewer_runs(
    stores: Stores,  # noqa: F811
) -> None:
    GATE.clear()
    busy, idle = gated_scheduler(stores, "busy"), gated_scheduler(stores, "idle")
    held = [await add_operation(stores, rows=1, operation_name="gated") for _ in range(4)]
    await busy.start()
    deadline = time.monotonic() + 30
    while len(busy.active) < len(held):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)
    await idle.start()
    new = [await add_operation(stores, rows=1, operation_name="gated") for _ in range(6)]
    for record in new:  # both hear of each at once, the busy one first
        busy.dispatcher.enqueue(record.id)
        idle.dispatcher.enqueue(record.id)
    while not await _all_held(stores, new):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)
    holders = [(await stores.operations.get(record.id)) for record in new]
    taken_by_idle = sum(1 for found in holders if found is not None and found.worker_id == "idle")
    GATE.set()
    await asyncio.gather(busy.wait_idle(), idle.wait_idle())
    await asyncio.gather(busy.stop(), idle.stop())
    # The idle process claims at once; the busy one defers each claim by its runs.
    assert taken_by_idle >= 4


async def _all_held(stores: Stores, records: list[OperationRecord]) -> bool:  # noqa: F811
    for record in records:
        found = await stores.operations.get(record.id)
        if found is None or found.worker_id is None:
            return False
    return True
