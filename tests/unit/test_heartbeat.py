"""The process's one heartbeat: every hold renewed in one statement per kind, each held
operation read once per check, and each run told once when it lost what it holds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime
from uuid import UUID, uuid4

import pytest

from bulkops.clock import utcnow
from bulkops.engine.heartbeat import Heartbeat, Held
from bulkops.errors import StorageError
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus

ME = "w1"


def record(status: OperationStatus = OperationStatus.RUNNING, worker: str = ME) -> OperationRecord:
    return OperationRecord(
        id=uuid4(),
        operation_name="op",
        status=status,
        created_by="u",
        created_at=utcnow(),
        source="upload",
        file_id="f",
        file_name="f.csv",
        file_size=1,
        file_format="csv",
        metadata={},
        worker_id=worker,
    )


class FakeStore:
    """Operations and chunks: what the heartbeat asks of storage, counted."""

    def __init__(self) -> None:
        self.records: dict[UUID, OperationRecord] = {}
        self.foreign: set[tuple[UUID, int]] = set()  # chunks another worker holds now
        self.beats: list[list[UUID]] = []
        self.chunk_beats: list[set[tuple[UUID, int]]] = []
        self.gets: list[UUID] = []
        self.failing = False
        self.refused = 0  # calls refused while failing

    def _answer(self) -> None:
        if self.failing:
            self.refused += 1
            raise StorageError("down")

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        self._answer()
        self.beats.append(list(operation_ids))

    async def heartbeat_chunks(
        self, held: Collection[tuple[UUID, int]], worker_id: str, now: datetime
    ) -> set[tuple[UUID, int]]:
        self._answer()
        self.chunk_beats.append(set(held))
        return set(held) - self.foreign

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        self._answer()
        self.gets.append(operation_id)
        return self.records.get(operation_id)


class Run:
    """A holder that remembers what it was told."""

    def __init__(self) -> None:
        self.lost_with: list[OperationStatus | None] = []
        self.seen_count = 0

    def lost(self, status: OperationStatus | None) -> None:
        self.lost_with.append(status)

    def seen(self, record: OperationRecord) -> None:
        self.seen_count += 1


async def until(check: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 5
    while True:
        result = check()
        if result if isinstance(result, bool) else await result:
            return
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.005)


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


def heartbeat(store: FakeStore) -> Heartbeat:
    return Heartbeat(store, store, check_interval=0.01, heartbeat_interval=0.02)  # type: ignore[arg-type]


async def test_every_hold_is_renewed_in_one_statement_per_kind(store: FakeStore) -> None:
    whole, split = record(), record(worker="w0")
    store.records = {whole.id: whole, split.id: split}
    beat = heartbeat(store)
    runs = [Run(), Run(), Run()]
    beat.hold(Held(whole.id, ME), runs[0])
    beat.hold(Held(split.id, ME, 1), runs[1])
    beat.hold(Held(split.id, ME, 2), runs[2])

    await until(lambda: len(store.chunk_beats) >= 2, "two beats")
    await beat.close()

    assert store.beats[0] == [whole.id]  # the operation's beat: one statement
    assert store.chunk_beats[0] == {(split.id, 1), (split.id, 2)}  # both chunks in one
    assert len(store.beats) == len(store.chunk_beats)
    assert all(run.lost_with == [] and run.seen_count > 0 for run in runs)
    # Each check reads each held operation once, however many chunks of it are held.
    checks = store.gets.count(whole.id)
    assert abs(store.gets.count(split.id) - checks) <= 1


async def test_a_run_is_told_once_when_another_holds_its_chunk(store: FakeStore) -> None:
    split = record(worker="w0")
    store.records = {split.id: split}
    beat = heartbeat(store)
    taken, kept = Run(), Run()
    beat.hold(Held(split.id, ME, 1), taken)
    beat.hold(Held(split.id, ME, 2), kept)
    store.foreign.add((split.id, 1))

    await until(lambda: bool(taken.lost_with), "the lost chunk")
    await until(lambda: len(store.chunk_beats) >= 3, "more beats")
    await beat.close()

    assert taken.lost_with == [None] and kept.lost_with == []
    assert store.chunk_beats[-1] == {(split.id, 2)}  # no longer beats for the lost one


async def test_every_run_of_a_cancelled_operation_is_told_its_status(store: FakeStore) -> None:
    split = record(worker="w0")
    store.records = {split.id: split}
    beat = heartbeat(store)
    runs = [Run(), Run()]
    for index, run in enumerate(runs):
        beat.hold(Held(split.id, ME, index), run)
    store.records[split.id] = replace(split, status=OperationStatus.CANCELLED)

    await until(lambda: all(run.lost_with for run in runs), "both runs told")
    await beat.close()

    assert [run.lost_with for run in runs] == [[OperationStatus.CANCELLED]] * 2


async def test_a_whole_operation_taken_over_is_lost_and_a_released_hold_forgotten(
    store: FakeStore,
) -> None:
    mine, other = record(), record()
    store.records = {mine.id: mine, other.id: other}
    beat = heartbeat(store)
    taken, released = Run(), Run()
    beat.hold(Held(mine.id, ME), taken)
    hold = beat.hold(Held(other.id, ME), released)
    hold.release()
    store.records[mine.id] = replace(mine, worker_id="w2")

    await until(lambda: bool(taken.lost_with), "the taken operation")
    await until(lambda: beat.holding == 0, "no hold left")
    await beat.close()

    assert taken.lost_with == [None]
    assert released.lost_with == [] and other.id not in store.gets


async def test_an_outage_loses_nothing_and_the_beats_resume(store: FakeStore) -> None:
    whole = record()
    store.records = {whole.id: whole}
    beat = heartbeat(store)
    run = Run()
    store.failing = True
    beat.hold(Held(whole.id, ME), run)
    await until(lambda: store.refused >= 4, "beats and checks refused")
    store.failing = False

    await until(lambda: len(store.beats) >= 1 and run.seen_count > 0, "beats again")
    await beat.close()

    assert run.lost_with == []


async def test_a_hold_registered_later_is_renewed_with_the_others(store: FakeStore) -> None:
    split = record(worker="w0")
    store.records = {split.id: split}
    beat = heartbeat(store)
    beat.hold(Held(split.id, ME, 1), Run())
    await until(lambda: len(store.chunk_beats) >= 1, "the first beat")
    beat.hold(Held(split.id, ME, 2), Run())
    beats_then = len(store.chunk_beats)

    await until(lambda: len(store.chunk_beats) > beats_then, "the next beat")
    await beat.close()

    assert store.chunk_beats[beats_then] == {(split.id, 1), (split.id, 2)}
