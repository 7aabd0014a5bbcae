"""The process's writer writes a recorder's rows as soon as its last write is done, and the
recorder holds the producer back while a write is in flight: at twice ``flush_rows`` row
records, or ``SPAN_ROOM`` times ``flush_rows`` plain completions, besides the batch being
written; and at once while storage is unreachable. One write carries the rows of every
recorder of the process, each fenced on its own."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from bulkops.engine.persistence import StorageRetry
from bulkops.engine.recorder import SPAN_ROOM, RowRecorder
from bulkops.engine.writer import FAST_ROW, SLOW_WRITE, RowWriter
from bulkops.errors import StorageUnavailable
from bulkops.storage.records import CompletedSpan, Fence, OperationRecord, RowRecord, RowWrite
from bulkops.storage.states import OperationStatus, RowState

FLUSH = 10
FAST = 32  # rows of a write: fast when they finished within FAST * FAST_ROW seconds
AT = datetime(2026, 1, 1, tzinfo=UTC)


class HeldStore:
    """A row store whose writes wait until the test lets them through."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()  # a write is waiting at the gate
        self.writes: list[tuple[int, int]] = []  # (records, plain rows) per write
        self.spans: list[CompletedSpan] = []  # every span written

        self.transactions: list[list[uuid.UUID]] = []  # the operations of each save_many
        self.lost: set[uuid.UUID] = set()  # operations whose fence is lost

    async def save_many(self, writes: Sequence[RowWrite]) -> list[OperationStatus | None]:
        self.entered.set()
        await self.gate.wait()
        self.transactions.append([write.operation_id for write in writes])
        statuses: list[OperationStatus | None] = []
        for write in writes:
            if write.operation_id in self.lost:
                statuses.append(None)
                continue
            plain = sum(span.last - span.first + 1 for span in write.completed)
            self.writes.append((len(write.rows), plain))
            self.spans += write.completed
            statuses.append(OperationStatus.RUNNING)
        return statuses


@dataclass
class Slots:
    """The process's row slots as the writer sees them."""

    held: int


class Holder:
    """The run a recorder stores rows for: what each write told it."""

    def __init__(
        self,
        statuses: list[OperationStatus | None] | None = None,
        failures: list[BaseException] | None = None,
    ) -> None:
        self.statuses = statuses if statuses is not None else []
        self.failures = failures if failures is not None else []

    def lost(self, status: OperationStatus | None) -> None:
        self.statuses.append(status)

    def unstored(self, error: BaseException) -> None:
        self.failures.append(error)


def recorder(
    store: HeldStore,
    retry: StorageRetry | None = None,
    hold_after: int = 0,
    writer: RowWriter | None = None,
    statuses: list[OperationStatus | None] | None = None,
    flush_rows: int = FLUSH,
) -> tuple[RowRecorder, OperationRecord]:
    operation = OperationRecord(
        id=uuid.uuid4(),
        operation_name="op",
        status=OperationStatus.RUNNING,
        created_by="t",
        created_at=AT,
        source="api",
        file_id="f",
        file_name="f.csv",
        file_size=1,
        file_format="csv",
        metadata={},
    )
    made = RowRecorder(
        operation,
        writer or RowWriter(store, retry or StorageRetry(0)),  # type: ignore[arg-type]
        fence=Fence("w"),
        flush_rows=flush_rows,
        hold_after=hold_after,
        run=Holder(statuses),
    )
    return made, operation


@contextlib.asynccontextmanager
async def started(rows: RowRecorder, store: HeldStore) -> AsyncIterator[None]:
    """The recorder's writer runs; a failed assertion never leaves it at the gate."""
    rows.start()
    try:
        yield
    finally:
        store.gate.set()
        await rows.abandon()


def record(operation: OperationRecord, number: int) -> RowRecord:
    return RowRecord(operation_id=operation.id, row_number=number, state=RowState.COMPLETED)


async def test_records_hold_the_producer_at_twice_flush_rows() -> None:
    store = HeldStore()
    rows, operation = recorder(store)
    async with started(rows, store):
        await _records_hold(rows, store, operation)


async def _records_hold(rows: RowRecorder, store: HeldStore, operation: OperationRecord) -> None:
    for number in range(1, 2 * FLUSH):
        rows.add(record(operation, number))
    await asyncio.wait_for(store.entered.wait(), 5)  # a write of those rows is in flight
    assert not rows.full
    for number in range(2 * FLUSH, 4 * FLUSH):
        rows.add(record(operation, number))

    assert rows.full
    store.gate.set()
    await asyncio.wait_for(rows.wait_room(), 5)
    assert not rows.full
    await rows.close()
    assert sum(records for records, _ in store.writes) == 4 * FLUSH - 1


async def test_plain_completions_run_on_until_span_room_times_flush_rows() -> None:
    store = HeldStore()
    rows, _ = recorder(store)
    async with started(rows, store):
        await _spans_hold(rows, store)


async def _spans_hold(rows: RowRecorder, store: HeldStore) -> None:
    rows.add_span(1, 1, AT)
    for number in range(2, FLUSH + 1):
        rows.add_span(number, number, AT)
    await asyncio.wait_for(store.entered.wait(), 5)  # a write of FLUSH rows is in flight
    limit = SPAN_ROOM * FLUSH
    for number in range(FLUSH + 1, FLUSH + limit):
        rows.add_span(number, number, AT)
    assert not rows.full  # far beyond twice flush_rows, no wait

    rows.add_span(FLUSH + limit, FLUSH + limit, AT)

    assert rows.full
    store.gate.set()
    await asyncio.wait_for(rows.wait_room(), 5)
    await rows.close()
    assert store.writes == [(0, FLUSH), (0, limit)]  # the rest in one transaction


async def test_the_producer_refills_the_buffer_while_a_write_is_in_flight() -> None:
    store = HeldStore()
    rows, _ = recorder(store)
    async with started(rows, store):
        limit = SPAN_ROOM * FLUSH
        for number in range(1, limit + 1):
            rows.add_span(number, number, AT)
        assert rows.full

        # The writer takes the whole buffer into one write, held at the gate: there is
        # room again before that write is stored.
        await asyncio.wait_for(rows.wait_room(), 5)
        assert store.entered.is_set() and store.writes == []
        for number in range(limit + 1, 2 * limit):
            rows.add_span(number, number, AT)
        assert not rows.full
        rows.add_span(2 * limit, 2 * limit, AT)
        assert rows.full  # the buffer and the write in flight: no more than that

        store.gate.set()
        await rows.close()
        assert store.writes == [(0, limit), (0, limit)]


async def test_spans_of_completed_rows_count_every_row_and_join_when_contiguous() -> None:
    store = HeldStore()
    store.gate.set()
    rows, _ = recorder(store)
    later = datetime(2026, 1, 2, tzinfo=UTC)
    last = 9 + SPAN_ROOM * FLUSH
    async with started(rows, store):
        rows.add_span(1, 3, AT)
        rows.add_span(4, 4, AT)  # joins the span before
        rows.add_span(5, 6, later)  # another time: a span of its own
        rows.add_span(8, 8, later)  # a gap: a span of its own
        assert not rows.full
        rows.add_span(9, last, later)  # joins the span before
        assert rows.full  # counted as the rows it holds, not as one entry
        await rows.close()

    assert [(span.first, span.last, span.completed_at) for span in store.spans] == [
        (1, 4, AT),
        (5, 6, later),
        (8, last, later),
    ]
    assert store.writes == [(0, last - 1)]


async def test_buffered_batches_are_written_one_after_another_without_a_new_row() -> None:
    # Rows of one concurrency window finish together: many batches at once, the producer
    # held. Each write follows the one before, not a timer or the next row (at
    # BULKOPS_FLUSH_ROWS=1 a timer per batch once held ten rows for two seconds).
    store = HeldStore()
    store.gate.set()
    rows, operation = recorder(store)
    async with started(rows, store):
        for number in range(1, 10 * FLUSH + 1):
            rows.add(record(operation, number))
        assert rows.full
        await asyncio.wait_for(rows.wait_room(), 5)
        deadline = asyncio.get_running_loop().time() + 5
        while sum(records for records, _ in store.writes) < 10 * FLUSH:
            assert asyncio.get_running_loop().time() < deadline, store.writes
            await asyncio.sleep(0.001)
    assert all(records <= 2 * FLUSH for records, _ in store.writes)


class FlakyStore(HeldStore):
    """A row store that is unreachable until ``back`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.back = asyncio.Event()
        self.refused = asyncio.Event()

    async def save_many(self, writes: Sequence[RowWrite]) -> list[OperationStatus | None]:
        if not self.back.is_set():
            self.refused.set()
            raise StorageUnavailable("down")
        self.gate.set()
        return await super().save_many(writes)


async def test_an_unreachable_storage_holds_the_producer_at_once() -> None:
    store = FlakyStore()
    rows, operation = recorder(store, retry=StorageRetry(30, wait_initial=0.01, wait_max=0.02))
    async with started(rows, store):
        rows.add(record(operation, 1))
        await asyncio.wait_for(store.refused.wait(), 5)
        assert rows.full  # one row buffered, but no further row starts while it cannot be stored

        store.back.set()
        await asyncio.wait_for(rows.wait_room(), 5)
        assert not rows.full
        await rows.close()
    assert store.writes == [(1, 0)]


async def test_a_run_started_after_the_writer_gave_up_on_an_outage_is_not_held() -> None:
    store = FlakyStore()
    writer = RowWriter(store, StorageRetry(0.05, wait_initial=0.01, wait_max=0.01))  # type: ignore[arg-type]
    first, operation = recorder(store, writer=writer)
    first.start()
    first.add(record(operation, 1))
    with pytest.raises(StorageUnavailable):
        await asyncio.wait_for(first.wait_room(), 5)  # the writer gave up: its run stops
    await first.abandon()

    store.back.set()  # storage answers again; a run claimed now has nothing to wait for
    second, later = recorder(store, writer=writer)
    async with started(second, store):
        other, _ = recorder(store, writer=writer)
        other.start()
        await other.abandon()  # another run ends: the writer gives every run its room again
        assert not second.full  # held, it would wait for a write that nothing would begin
        second.add(record(later, 1))
        await asyncio.wait_for(second.close(), 5)
    assert store.writes == [(1, 0)]


async def test_a_slow_write_holds_the_producer_once_hold_after_rows_are_unstored() -> None:
    store = HeldStore()
    rows, operation = recorder(store, hold_after=3)  # MaxRowConcurrency 3
    async with started(rows, store):
        rows.add(record(operation, 1))
        await asyncio.wait_for(store.entered.wait(), 5)  # row 1's write is in flight
        number = 1
        while not rows.full:  # a row finishes every few ms while the write hangs
            number += 1
            rows.add(record(operation, number))
            await asyncio.sleep(0.005)
        # Held once 3 rows were unstored (the one in flight and those behind it), far below
        # the room of a quick write (twice flush_rows).
        assert 3 <= number < 2 * FLUSH
        store.gate.set()
        await asyncio.wait_for(rows.wait_room(), 5)
        await rows.close()
    assert store.writes[0] == (1, 0)


async def test_one_write_carries_the_rows_of_every_recorder_each_fenced_on_its_own() -> None:
    store = HeldStore()
    writer = RowWriter(store, StorageRetry(0))  # type: ignore[arg-type]
    seen: list[OperationStatus | None] = []
    first, one = recorder(store, writer=writer, statuses=seen)
    second, two = recorder(store, writer=writer, statuses=seen)
    store.lost.add(two.id)  # another worker took the second over
    first.start()
    second.start()
    try:
        first.add(record(one, 1))
        await asyncio.wait_for(store.entered.wait(), 5)  # row 1 alone is being written
        first.add(record(one, 2))
        second.add(record(two, 1))
        second.add_span(2, 5, AT)
        store.gate.set()
        await asyncio.wait_for(first.close(), 5)
        await asyncio.wait_for(second.close(), 5)
    finally:
        store.gate.set()
        await first.abandon()
        await second.abandon()
    assert store.transactions == [[one.id], [one.id, two.id]]  # both runs in one write
    assert store.writes == [(1, 0), (1, 0)]  # the lost one's rows were not written
    assert seen == [OperationStatus.RUNNING, OperationStatus.RUNNING, None]


async def test_a_slow_write_holds_every_recorder_once_the_process_limit_is_unstored() -> None:
    store = HeldStore()
    writer = RowWriter(store, StorageRetry(0), most_unstored=4)  # type: ignore[arg-type]
    first, one = recorder(store, hold_after=3, writer=writer)
    second, two = recorder(store, hold_after=3, writer=writer)
    first.start()
    second.start()
    try:
        first.add(record(one, 1))
        await asyncio.wait_for(store.entered.wait(), 5)  # row 1's write is in flight
        deadline = asyncio.get_running_loop().time() + 5
        while not writer.slow:  # the write hangs past SLOW_WRITE
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        second.add(record(two, 1))
        second.add(record(two, 2))
        assert not first.full and not second.full  # 3 unstored: below 4 (not 3 + 3)
        second.add(record(two, 3))
        assert second.full
        first.refresh()
        assert first.full  # the other run's rows count too
        store.gate.set()
        await asyncio.wait_for(first.wait_room(), 5)
        await asyncio.wait_for(second.wait_room(), 5)
        await first.close()
        await second.close()
    finally:
        store.gate.set()
        await first.abandon()
        await second.abandon()
    assert store.writes == [(1, 0), (3, 0)]


async def slow_write_of(
    store: HeldStore, writer: RowWriter, rows: RowRecorder, operation: OperationRecord, pause: float
) -> None:
    """Row 1's write in flight while FAST rows finish (and ``pause`` seconds more), then
    the write of those rows, hung past SLOW_WRITE."""
    rows.add(record(operation, 1))
    await asyncio.wait_for(store.entered.wait(), 5)  # row 1's write is in flight
    for number in range(2, FAST + 2):
        rows.add(record(operation, number))
    await asyncio.sleep(pause)
    store.entered.clear()
    store.gate.set()  # row 1's write goes through; the next, of FAST rows, hangs
    store.gate.clear()
    await asyncio.wait_for(store.entered.wait(), 5)
    deadline = asyncio.get_running_loop().time() + 5
    while not writer.slow:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.001)


async def test_during_a_slow_write_of_fast_rows_as_many_again_may_wait_behind_it() -> None:
    store = HeldStore()
    writer = RowWriter(store, StorageRetry(0))  # type: ignore[arg-type]
    rows, operation = recorder(store, hold_after=1, writer=writer, flush_rows=FAST)
    rows.start()
    try:
        await slow_write_of(store, writer, rows, operation, pause=0)  # fast rows
        behind = 0
        while not rows.full:  # held once as many rows wait as the write in flight holds
            behind += 1
            rows.add(record(operation, FAST + 1 + behind))
        assert behind == FAST
        store.gate.set()
        await asyncio.wait_for(rows.wait_room(), 5)
        await rows.close()
    finally:
        store.gate.set()
        await rows.abandon()
    assert store.writes[:2] == [(1, 0), (FAST, 0)]


async def test_during_a_slow_write_of_slow_rows_the_limit_holds_them() -> None:
    store = HeldStore()
    writer = RowWriter(store, StorageRetry(0))  # type: ignore[arg-type]
    rows, operation = recorder(store, hold_after=1, writer=writer, flush_rows=FAST)
    rows.start()
    try:
        # As many rows, but over more than FAST_ROW each.
        await slow_write_of(store, writer, rows, operation, pause=FAST * FAST_ROW)
        rows.refresh()
        assert rows.full  # the limit (1) was passed by the write in flight alone
        store.gate.set()
        await asyncio.wait_for(rows.wait_room(), 5)
        await rows.close()
    finally:
        store.gate.set()
        await rows.abandon()


class PickyStore(HeldStore):
    """A row store that refuses (not unreachable: a bad write) any write of ``bad``."""

    def __init__(self, bad: uuid.UUID) -> None:
        super().__init__()
        self.gate.set()
        self.bad = bad

    async def save_many(self, writes: Sequence[RowWrite]) -> list[OperationStatus | None]:
        if any(write.operation_id == self.bad for write in writes):
            raise ValueError("a value the database refuses")
        return await super().save_many(writes)


async def test_a_bad_write_fails_its_run_only_and_the_others_are_stored() -> None:
    bad = uuid.uuid4()
    store = PickyStore(bad)
    writer = RowWriter(store, StorageRetry(0))  # type: ignore[arg-type]
    good, one = recorder(store, writer=writer)
    failures: list[BaseException] = []
    broken = RowRecorder(
        replace(one, id=bad),
        writer,
        fence=Fence("w"),
        flush_rows=FLUSH,
        run=Holder(failures=failures),
    )
    good.start()
    broken.start()
    try:
        good.add(record(one, 1))
        broken.add(RowRecord(operation_id=bad, row_number=1, state=RowState.COMPLETED))
        await asyncio.wait_for(good.close(), 5)
        with pytest.raises(ValueError):
            await asyncio.wait_for(broken.close(), 5)
    finally:
        await good.abandon()
        await broken.abandon()
    assert store.writes == [(1, 0)]  # the good run's row, stored on its own
    assert [str(error) for error in failures] == ["a value the database refuses"]


async def test_rows_running_count_toward_the_hold_of_a_slow_write() -> None:
    store = HeldStore()
    slots = Slots(held=3)  # rows holding a slot of the process right now
    writer = RowWriter(
        store,  # type: ignore[arg-type]
        StorageRetry(0),
        most_unstored=4,
        slots=slots,
    )
    rows, operation = recorder(store, hold_after=10, writer=writer)
    rows.start()
    try:
        rows.add(record(operation, 1))
        await asyncio.wait_for(store.entered.wait(), 5)  # row 1's write is in flight
        deadline = asyncio.get_running_loop().time() + 5
        while not writer.slow:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        rows.refresh()
        assert rows.full  # 1 unstored + 3 running: the 4 slots, though 1 < hold_after
        slots.held = 2
        rows.refresh()
        assert not rows.full  # a slot is free again
        store.gate.set()
        await rows.close()
    finally:
        store.gate.set()
        await rows.abandon()
    assert store.writes == [(1, 0)]


async def test_after_a_slow_write_a_small_one_is_held_from_its_start_a_large_one_is_not() -> None:
    store = HeldStore()
    writer = RowWriter(store, StorageRetry(0), most_unstored=4)  # type: ignore[arg-type]
    rows, operation = recorder(store, hold_after=4, writer=writer)
    rows.start()
    try:
        rows.add(record(operation, 1))
        await asyncio.wait_for(store.entered.wait(), 5)
        deadline = asyncio.get_running_loop().time() + 5
        while not writer.slow:  # the first write takes longer than SLOW_WRITE
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        rows.add(record(operation, 2))  # the next write: 1 row, fewer than the limit of 4
        store.entered.clear()
        store.gate.set()  # the first write goes through; the next waits at the gate
        store.gate.clear()
        await asyncio.wait_for(store.entered.wait(), 5)
        assert writer.slow  # held from its start, not after SLOW_WRITE
        for number in range(3, 8):  # the write after it: 5 rows, more than the limit
            rows.add(record(operation, number))
        await asyncio.sleep(2 * SLOW_WRITE)  # row 2's write is slow too
        store.entered.clear()
        store.gate.set()
        store.gate.clear()
        await asyncio.wait_for(store.entered.wait(), 5)
        assert not writer.slow  # it lets the producers on until it is slow itself
        store.gate.set()
        await rows.close()
    finally:
        store.gate.set()
        await rows.abandon()
    assert store.writes == [(1, 0), (1, 0), (5, 0)]
