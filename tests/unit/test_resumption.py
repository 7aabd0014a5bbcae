"""Resumption and storage outages, on memory stores: abandoned operations are taken over,
rows already final never run again, and writes ride out an outage."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from bulkops.clock import utcnow
from bulkops.definition import Registry
from bulkops.engine.processor import Processor, ProcessorConfig, Stores
from bulkops.engine.reaper import ALIVE_PATIENCE
from bulkops.engine.scheduler import SchedulerConfig, WorkScheduler
from bulkops.errors import StorageUnavailable
from bulkops.storage import lifecycle
from bulkops.storage.files import open_file_store
from bulkops.storage.liveness import NoLiveness
from bulkops.storage.memory import MemoryEventStore, MemoryStore
from bulkops.storage.records import (
    ChunkRecord,
    Fence,
    OperationRecord,
    ProgressDelta,
    RowRecord,
    RowWrite,
)
from bulkops.storage.states import EventType, OperationStatus, RowState
from tests.unit.test_engine import RUNS, Count, add_operation


class OutageStore(MemoryStore):
    """A memory store whose row writes fail while ``down`` (or for the next ``failures``)."""

    def __init__(self, events: MemoryEventStore) -> None:
        super().__init__(events)
        self.down = False
        self.failures = 0
        self.refused = 0

    async def save_many(self, writes: Sequence[RowWrite]) -> list[OperationStatus | None]:
        if self.down or self.failures > 0:
            self.failures -= 1
            self.refused += 1
            raise StorageUnavailable("database write failed: OperationalError: connection lost")
        return await super().save_many(writes)


@pytest.fixture
def store() -> OutageStore:
    return OutageStore(MemoryEventStore())


@pytest.fixture
def stores(store: OutageStore) -> Stores:
    return Stores(store, store, store.events, open_file_store("memory://"), store, store)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def scheduler(
    stores: Stores, name: str, *, retry_timeout: float = 5.0, **options: Any
) -> WorkScheduler:
    config = ProcessorConfig(
        worker_id=name,
        flush_rows=2,
        flush_interval=0.01,
        heartbeat_interval=0.02,
        storage_retry_timeout=retry_timeout,
    )
    processor = Processor(Registry([Count]), stores, config)
    options.setdefault("abandon_after", 0.2)
    options.setdefault("scan_interval", 0.02)
    return WorkScheduler(processor, SchedulerConfig(worker_count=1, **options))


async def until(predicate: Callable[[], Awaitable[bool]], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def abandoned(stores: Stores, rows: int, done: int, **overrides: Any) -> OperationRecord:
    """An operation held by a worker that died after storing its first ``done`` rows."""
    record = await add_operation(stores, rows=rows, **overrides)
    claimed = await stores.operations.apply(
        lifecycle.claim(record, "gone", utcnow() - timedelta(hours=1))
    )
    assert claimed is not None
    finished = [
        RowRecord(record.id, n, RowState.COMPLETED, step_name="process", completed_at=utcnow())
        for n in range(1, done + 1)
    ]
    await stores.rows.save(record.id, finished, ProgressDelta(done, done, 0), fence=Fence("gone"))
    return claimed


async def status_of(stores: Stores, operation_id: UUID) -> OperationRecord:
    record = await stores.operations.get(operation_id)
    assert record is not None
    return record


async def test_an_abandoned_operation_is_resumed_without_rerunning_final_rows(
    stores: Stores,
) -> None:
    record = await abandoned(stores, rows=6, done=3)
    worker = scheduler(stores, "w1")
    await worker.start()

    async def completed() -> bool:
        return (await status_of(stores, record.id)).status is OperationStatus.COMPLETED

    await until(completed, "the resumed operation to complete")
    await worker.stop()
    assert sorted(name for name, _ in RUNS) == ["r3", "r4", "r5"]  # rows 4-6 only
    final = await status_of(stores, record.id)
    assert (final.processed_rows, final.successful_rows, final.resume_count) == (6, 6, 1)
    assert final.worker_id == "w1"
    events = await stores.events.read(after=0, limit=10, operation_id=record.id)
    assert [e.type for e in events] == [
        EventType.STATUS_CHANGED,  # claimed by the worker that died
        EventType.STATUS_CHANGED,  # resumed
        EventType.COMPLETED,
    ]
    assert "resumed after its worker stopped responding" in events[1].message


async def test_a_holder_that_renews_its_heartbeat_keeps_its_operation(stores: Stores) -> None:
    record = await abandoned(stores, rows=2, done=0)
    worker = scheduler(stores, "w1", scan_interval=3600)  # scans only when called here
    await worker.start()  # the first scan only suspects it
    await worker.wait_idle()
    assert (await status_of(stores, record.id)).worker_id == "gone"
    await stores.operations.heartbeat([record.id], "gone", utcnow())  # it was alive after all

    await worker.scan_abandoned()
    await worker.wait_idle()
    await worker.stop()

    assert (await status_of(stores, record.id)).worker_id == "gone"
    assert RUNS == []


class KnownAlive(NoLiveness):
    """Liveness that knows ``holders`` alive (or cannot answer, ``failing``)."""

    def __init__(self, *holders: str, failing: bool = False) -> None:
        self.holders = set(holders)
        self.failing = failing

    async def alive(self) -> set[str]:
        if self.failing:
            raise StorageUnavailable("database read failed: OperationalError: connection lost")
        return set(self.holders)


async def held(stores: Stores, holder: str, silent: float) -> OperationRecord:
    """An operation held by ``holder``, whose last heartbeat was ``silent`` seconds ago."""
    record = await add_operation(stores, rows=2)
    claimed = await stores.operations.apply(
        lifecycle.claim(record, holder, utcnow() - timedelta(seconds=silent))
    )
    assert claimed is not None
    return claimed


@pytest.mark.parametrize("failing", [False, True])
async def test_a_holder_known_alive_keeps_its_operation_past_an_aged_heartbeat(
    stores: Stores, failing: bool
) -> None:
    # abandon_after 10 s: the live holder's 60 s old heartbeat is stale, but within
    # ALIVE_PATIENCE; the hung one's is past it, the dead one's is stale.
    late = await held(stores, "busy", silent=60)
    hung = await held(stores, "hung", silent=ALIVE_PATIENCE * 10 + 60)
    dead = await held(stores, "gone", silent=60)
    live = replace(stores, liveness=KnownAlive("busy", "hung", failing=failing))
    worker = scheduler(live, "w1", abandon_after=10, scan_interval=3600)
    await worker.start()  # the first scan only suspects
    await worker.scan_abandoned()  # the second takes over

    async def completed(record: OperationRecord) -> bool:
        return (await status_of(stores, record.id)).status is OperationStatus.COMPLETED

    await until(lambda: completed(dead), "the dead holder's operation to be resumed")
    await until(lambda: completed(hung), "the hung holder's operation to be resumed")
    if failing:  # storage cannot say it is alive: the heartbeat decides
        await until(lambda: completed(late), "the late holder's operation to be resumed")
    await worker.wait_idle()
    await worker.stop()

    kept = await status_of(stores, late.id)
    if not failing:
        assert (kept.status, kept.worker_id, kept.resume_count) == (
            OperationStatus.RUNNING,
            "busy",
            0,
        )


@pytest.mark.parametrize("failing", [False, True])
async def test_a_holder_known_alive_keeps_its_chunk_past_an_aged_heartbeat(
    stores: Stores, failing: bool
) -> None:
    record = await held(stores, "w0", silent=0)
    parts = [ChunkRecord(record.id, i, 1 + i, 1, -1) for i in range(2)]
    split = await stores.chunks.split(lifecycle.split(record, 2, 2, utcnow()), parts)
    assert split is not None
    late = utcnow() - timedelta(seconds=60)  # stale by abandon_after 10 s; within patience
    for holder in ("busy", "gone"):
        assert await stores.chunks.claim_chunk(["count"], holder, late, late) is not None
    live = replace(stores, liveness=KnownAlive("busy", failing=failing))
    worker = scheduler(live, "w1", abandon_after=10, scan_interval=3600)
    await worker.start()

    async def resumed(index: int) -> bool:
        chunk = await stores.chunks.get_chunk(record.id, index)
        return chunk is not None and chunk.resume_count == 1

    await worker.poll_chunks()
    await until(lambda: resumed(1), "the dead holder's chunk to be resumed")
    if failing:  # storage cannot say it is alive: the heartbeat decides
        await until(lambda: resumed(0), "the late holder's chunk to be resumed")
    await worker.wait_idle()
    await worker.stop()

    kept = await stores.chunks.get_chunk(record.id, 0)
    assert kept is not None
    if not failing:
        assert (kept.worker_id, kept.resume_count) == ("busy", 0)


async def test_an_operation_that_keeps_stopping_its_workers_is_failed(stores: Stores) -> None:
    record = await abandoned(stores, rows=2, done=1)
    worker = scheduler(stores, "w1", max_resumes=2)
    await stores.operations.apply(
        lifecycle.OperationChange(
            record.id,
            record.version,
            {"resume_count": 2, "version": record.version + 1},
            record,
        )
    )
    await worker.start()

    async def failed() -> bool:
        return (await status_of(stores, record.id)).status is OperationStatus.FAILED

    await until(failed, "the operation to be failed")
    await worker.stop()
    final = await status_of(stores, record.id)
    assert "it is not resumed again after 2 resumptions" in (final.error_message or "")
    assert (final.processed_rows, RUNS) == (1, [])


async def test_a_short_outage_loses_nothing_and_reruns_nothing(
    stores: Stores, store: OutageStore
) -> None:
    store.failures = 4  # the first writes fail, then storage is back
    record = await add_operation(stores, rows=10)
    worker = scheduler(stores, "w1")
    await worker.start()
    await worker.wait_idle()
    await worker.stop()
    final = await status_of(stores, record.id)
    assert (final.status, final.processed_rows, final.successful_rows) == (
        OperationStatus.COMPLETED,
        10,
        10,
    )
    assert store.refused == 4
    assert sorted(name for name, _ in RUNS) == sorted(f"r{i}" for i in range(10))


async def test_a_long_outage_leaves_the_operation_to_be_resumed(
    stores: Stores, store: OutageStore
) -> None:
    store.down = True
    record = await add_operation(stores, rows=8)
    first = scheduler(stores, "w1", retry_timeout=0.2, scan_interval=3600)
    await first.start()
    await first.wait_idle()  # its run gave up on storage
    stranded = await status_of(stores, record.id)
    assert (stranded.status, stranded.worker_id, stranded.processed_rows) == (
        OperationStatus.RUNNING,
        "w1",
        0,
    )

    store.down = False
    second = scheduler(stores, "w2")
    await second.start()

    async def completed() -> bool:
        return (await status_of(stores, record.id)).status is OperationStatus.COMPLETED

    await until(completed, "another worker to resume it")
    await asyncio.gather(first.stop(), second.stop())
    final = await status_of(stores, record.id)
    assert (final.processed_rows, final.worker_id, final.resume_count) == (8, "w2", 1)


class ClaimThenOutage(OutageStore):
    """Operations cannot be read for ``outage`` seconds right after the first chunk claim:
    the claim is stored, the claimer cannot read the operation yet."""

    def __init__(self, events: MemoryEventStore) -> None:
        super().__init__(events)
        self.outage = 0.0
        self.down_until = 0.0

    async def claim_chunk(self, *args: Any, **kwargs: Any) -> ChunkRecord | None:
        claimed = await super().claim_chunk(*args, **kwargs)
        if claimed is not None and self.outage:
            self.down_until, self.outage = time.monotonic() + self.outage, 0.0
        return claimed

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        if time.monotonic() < self.down_until:
            raise StorageUnavailable("database read failed: OperationalError: connection lost")
        return await super().get(operation_id)


@pytest.mark.parametrize("outage", [0.3, 1.5])
async def test_a_chunk_claimed_as_storage_goes_away_runs_once_it_is_back(outage: float) -> None:
    store = ClaimThenOutage(MemoryEventStore())
    stores = Stores(store, store, store.events, open_file_store("memory://"), store, store)
    record = await held(stores, "w1", silent=0)
    parts = [ChunkRecord(record.id, i, 1 + i, 1, -1) for i in range(2)]
    assert await stores.chunks.split(lifecycle.split(record, 2, 2, utcnow()), parts) is not None
    store.outage = outage  # within the 1 s of retries: ridden out; past them: handed back
    # The claimer is alive: a chunk it claimed and left would wait ALIVE_PATIENCE x 10 s.
    live = replace(stores, liveness=KnownAlive("w1"))
    worker = scheduler(live, "w1", abandon_after=10, scan_interval=3600, retry_timeout=1)
    await worker.start()

    async def completed() -> bool:  # read past the fault: the test is not the claimer
        current = await MemoryStore.get(store, record.id)
        if current is not None and current.status is OperationStatus.COMPLETED:
            return True
        await worker.poll_chunks()  # the process's periodic poll
        return False

    await until(completed, "every chunk to run once storage answers again")
    await worker.wait_idle()
    await worker.stop()
    assert sorted(name for name, _ in RUNS) == ["r0", "r1"]


async def test_work_held_here_in_storage_but_run_by_none_is_taken_back_at_the_next_scan(
    stores: Stores,
) -> None:
    # A claim whose answer was lost with its connection: storage says w1 holds them, w1
    # runs neither. w1 is alive, so nobody else would take them for ALIVE_PATIENCE x 10 s.
    whole = await held(stores, "w1", silent=60)
    split = await held(stores, "w0", silent=0)
    parts = [ChunkRecord(split.id, i, 1 + i, 1, -1) for i in range(2)]
    assert await stores.chunks.split(lifecycle.split(split, 2, 2, utcnow()), parts) is not None
    late = utcnow() - timedelta(seconds=60)
    assert await stores.chunks.claim_chunk(["count"], "w1", late, late) is not None
    live = replace(stores, liveness=KnownAlive("w1"))
    worker = scheduler(live, "w1", abandon_after=10, scan_interval=3600)
    await worker.start()  # its first scan

    async def completed(record: OperationRecord) -> bool:
        return (await status_of(stores, record.id)).status is OperationStatus.COMPLETED

    await until(lambda: completed(whole), "the operation held here to be run")
    await until(lambda: completed(split), "the chunk held here to be run")
    await worker.wait_idle()
    await worker.stop()
    assert sorted(name for name, _ in RUNS) == ["r0", "r0", "r1", "r1"]
