"""The engine on memory adapters: claims, concurrency, sweeper, heartbeats."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

import bulkops as bo
from bulkops.clock import utcnow
from bulkops.definition import Registry
from bulkops.engine.processor import Processor, ProcessorConfig, Stores
from bulkops.engine.scheduler import SchedulerConfig, WorkScheduler
from bulkops.storage import lifecycle
from bulkops.storage.files import open_file_store
from bulkops.storage.memory import MemoryEventStore, MemoryStore
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import EventType, OperationStatus

RUNS: list[tuple[str, str]] = []


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


@bo.operation("count")
class Count(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        RUNS.append((row.name, "run"))
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


@pytest.fixture
def stores() -> Stores:
    events = MemoryEventStore()
    memory = MemoryStore(events)
    files = open_file_store("memory://")
    return Stores(
        operations=memory, rows=memory, events=events, files=files, limits=memory, chunks=memory
    )


def scheduler(stores: Stores, name: str, **options: float) -> WorkScheduler:
    processor = Processor(
        Registry([Count]),
        stores,
        ProcessorConfig(worker_id=name, flush_rows=2, flush_interval=0.01, heartbeat_interval=0.02),
    )
    return WorkScheduler(processor, SchedulerConfig(worker_count=2, **options))  # type: ignore[arg-type]


async def hold(stores: Stores, record: OperationRecord, worker: str, at: datetime) -> None:
    """Store ``record`` as claimed by ``worker`` at ``at``."""
    assert await stores.operations.apply(lifecycle.claim(record, worker, at)) is not None


async def _bytes(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def add_operation(stores: Stores, rows: int, **overrides: object) -> OperationRecord:
    content = "name\n" + "".join(f"r{i}\n" for i in range(rows))
    stored = await stores.files.put(_bytes(content.encode()))
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "operation_name": "count",
        "status": OperationStatus.PENDING,
        "created_by": "tests",
        "created_at": utcnow(),
        "source": "default",
        "file_id": stored.file_id,
        "file_name": "f.csv",
        "file_size": stored.size,
        "file_format": "csv",
        "metadata": {},
    }
    values.update(overrides)
    record = OperationRecord(**values)  # type: ignore[arg-type]
    await stores.operations.add(record)
    return record


async def test_two_workers_process_each_operation_exactly_once(stores: Stores) -> None:
    records = [await add_operation(stores, rows=5) for _ in range(6)]
    first, second = scheduler(stores, "w1"), scheduler(stores, "w2")
    await asyncio.gather(first.start(), second.start())
    for record in records:  # both hear about every operation
        first.enqueue(record.id)
        second.enqueue(record.id)
    await asyncio.gather(first.wait_idle(), second.wait_idle())
    await asyncio.gather(first.stop(), second.stop())
    assert len(RUNS) == 30  # 6 operations x 5 rows, none twice
    for record in records:
        final = await stores.operations.get(record.id)
        assert final is not None
        assert (final.status, final.processed_rows) == (OperationStatus.COMPLETED, 5)
        assert final.worker_id in {"w1", "w2"}


async def test_enqueue_ignores_duplicates_and_finished_operations(stores: Stores) -> None:
    record = await add_operation(stores, rows=2)
    worker = scheduler(stores, "w1")
    await worker.start()  # startup pickup queues the Pending operation
    worker.enqueue(record.id)
    await worker.wait_idle()
    worker.enqueue(record.id)  # now Completed: looked at, not claimed
    await worker.wait_idle()
    await worker.stop()
    assert len(RUNS) == 2
    events = await stores.events.read(after=0, limit=100, operation_id=record.id)
    assert [e.type for e in events] == [EventType.STATUS_CHANGED, EventType.COMPLETED]


async def test_stuck_operations_are_failed_by_the_sweeper(stores: Stores) -> None:
    record = await add_operation(stores, rows=1)
    await hold(stores, record, "gone", utcnow() - timedelta(hours=1))
    worker = scheduler(stores, "w1", stuck_timeout=60)
    await worker.sweep_stuck()
    final = await stores.operations.get(record.id)
    assert final is not None and final.status is OperationStatus.FAILED
    assert "stuck-operation timeout (60 s)" in (final.error_message or "")
    events = await stores.events.read(after=0, limit=10, operation_id=record.id)
    assert [e.type for e in events] == [EventType.STATUS_CHANGED, EventType.FAILED]


async def test_recent_running_operations_are_left_alone(stores: Stores) -> None:
    record = await add_operation(stores, rows=1)
    await hold(stores, record, "busy", utcnow())
    await scheduler(stores, "w1", stuck_timeout=60).sweep_stuck()
    final = await stores.operations.get(record.id)
    assert final is not None and final.status is OperationStatus.RUNNING


async def test_poller_picks_up_operations_created_after_start(stores: Stores) -> None:
    worker = scheduler(stores, "w1", poll_interval=0.01)
    await worker.start()
    record = await add_operation(stores, rows=3)
    deadline = time.monotonic() + 10
    while (await stores.operations.get(record.id)).status is not OperationStatus.COMPLETED:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "poller never picked the operation up"
        await asyncio.sleep(0.01)
    await worker.stop()
    assert len(RUNS) == 3


async def test_held_operations_get_heartbeats(stores: Stores) -> None:
    gate = asyncio.Event()

    @bo.operation("hold")
    class Hold(bo.RowOperation[Meta, Item]):
        async def process_row(self, row: Item, metadata: Meta) -> None:
            await gate.wait()

    processor = Processor(
        Registry([Hold]),
        stores,
        ProcessorConfig(worker_id="w1", flush_interval=0.01, heartbeat_interval=0.02),
    )
    worker = WorkScheduler(processor, SchedulerConfig(worker_count=1))
    record = await add_operation(stores, rows=1, operation_name="hold")
    await worker.start()
    claimed_at = None
    deadline = time.monotonic() + 10
    while True:
        current = await stores.operations.get(record.id)
        assert current is not None
        if current.heartbeat_at is not None:
            if claimed_at is None:
                claimed_at = current.heartbeat_at
            elif current.heartbeat_at > claimed_at:
                break
        assert time.monotonic() < deadline, "heartbeat never renewed"
        await asyncio.sleep(0.01)
    gate.set()
    await worker.wait_idle()
    await worker.stop()


async def test_operations_this_worker_does_not_serve_are_left_for_others(
    stores: Stores,
) -> None:
    foreign = await add_operation(stores, rows=2, operation_name="served-elsewhere")
    mine = await add_operation(stores, rows=2)
    worker = scheduler(stores, "w1")
    await worker.start()
    await worker.wait_idle()
    await worker.stop()
    untouched = await stores.operations.get(foreign.id)
    assert untouched is not None
    assert (untouched.status, untouched.worker_id) == (OperationStatus.PENDING, None)
    done = await stores.operations.get(mine.id)
    assert done is not None and done.status is OperationStatus.COMPLETED
