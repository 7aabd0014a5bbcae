"""The row window hands a finished row's outcome on the moment the row ends, whatever its
run waits for meanwhile: a row left in memory until its run's next slot would be neither
stored nor counted by the writer's hold, and a crash would run it again."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from bulkops.engine.fair_share import FairShare, SharedSlots
from bulkops.engine.window import Window
from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState

OPERATION = uuid4()


class Room:
    """The recorder as the window sees it: room unless the test takes it away."""

    def __init__(self) -> None:
        self._room = asyncio.Event()
        self._room.set()

    @property
    def full(self) -> bool:
        return not self._room.is_set()

    async def wait_room(self) -> None:
        await self._room.wait()

    def hold(self) -> None:
        self._room.clear()

    def let_on(self) -> None:
        self._room.set()


async def row(number: int, release: asyncio.Event) -> RowRecord:
    await release.wait()
    return RowRecord(operation_id=OPERATION, row_number=number, state=RowState.COMPLETED)


async def until(condition: object, what: str) -> None:
    """Poll ``condition()`` (a callable) with a deadline."""
    async with asyncio.timeout(5):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.001)


class Handed:
    """The sink of a window: the records it handed on, in order."""

    def __init__(self, added: list[RowRecord]) -> None:
        self.record = added.append


def window(slots: SharedSlots | None, added: list[RowRecord], room: Room) -> Window:
    return Window(2, slots, Handed(added), room)  # type: ignore[arg-type]


async def test_rows_that_finish_while_their_run_waits_for_a_slot_are_handed_on_at_once() -> None:
    share = FairShare(2)
    mine = share.join(uuid4(), "alice", 0, 2)
    other = share.join(uuid4(), "alice", 0, 2)
    added: list[RowRecord] = []
    runs = window(SharedSlots(2, share, mine), added, Room())
    release = asyncio.Event()
    await runs.launch(row(1, release))
    await runs.launch(row(2, release))  # both slots of the process held
    # Another run waits for the process's slots, and never gives one back here.
    taken = [asyncio.create_task(share.take(other)) for _ in range(2)]
    third = asyncio.create_task(runs.launch(row(3, release)))
    try:
        release.set()  # rows 1 and 2 finish; their slots go to the other run
        await until(lambda: all(task.done() for task in taken), "the other run's slots")
        await until(lambda: len(added) == 2, "rows 1 and 2 handed on")
        assert sorted(record.row_number for record in added) == [1, 2]
        assert not third.done()  # row 3 still waits for a slot
    finally:
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)
        await runs.cancel()


async def test_rows_that_finish_while_the_writer_holds_the_producer_are_handed_on() -> None:
    added: list[RowRecord] = []
    room = Room()
    runs = window(None, added, room)
    release = asyncio.Event()
    await runs.launch(row(1, release))
    room.hold()  # a slow write with the process's unstored rows at their limit
    second = asyncio.create_task(runs.launch(row(2, release)))
    try:
        release.set()
        await until(lambda: len(added) == 1, "row 1 handed on")
        assert not second.done()  # the producer still waits for room
    finally:
        room.let_on()
        await second
        await runs.finish()
    assert [record.row_number for record in added] == [1, 2]


async def test_no_slot_is_taken_while_the_writer_holds_the_producer() -> None:
    added: list[RowRecord] = []
    room = Room()
    runs = window(None, added, room)
    release = asyncio.Event()
    release.set()
    room.hold()
    started = asyncio.create_task(runs.launch(row(1, release)))
    for _ in range(5):  # the launch runs until it waits for something
        await asyncio.sleep(0)
    assert not runs._in_flight and not started.done()  # waits for room before its slot
    room.let_on()
    await started
    await runs.finish()
    assert [record.row_number for record in added] == [1]


async def test_a_row_that_raised_is_raised_to_the_producer() -> None:
    added: list[RowRecord] = []
    runs = window(None, added, Room())
    release = asyncio.Event()

    async def broken() -> RowRecord:
        await release.wait()
        raise RuntimeError("a defect in the runner")

    await runs.launch(broken())
    await runs.launch(row(2, release))
    release.set()
    with pytest.raises(RuntimeError, match="a defect"):
        await runs.finish()
    await runs.cancel()
    assert [record.row_number for record in added] == [2]  # the good row is kept


class WatchedSlots:
    """One slot; ``give`` notes how many outcomes were handed on by then, and the hold can
    begin while a launch waits for the slot (``hold_on_take``)."""

    def __init__(self, added: list[RowRecord], room: Room) -> None:
        self._free = asyncio.Semaphore(1)
        self._added = added
        self._room = room
        self.handed_on_at_give: list[int] = []
        self.takes = 0
        self.hold_on_take = False

    async def take(self) -> None:
        await self._free.acquire()
        self.takes += 1
        if self.hold_on_take:  # the writer's hold began while the launch waited
            self.hold_on_take = False
            self._room.hold()

    def give(self) -> None:
        self.handed_on_at_give.append(len(self._added))
        self._free.release()


def watched() -> tuple[Window, WatchedSlots, Room, list[RowRecord]]:
    """A window of one watched slot, its room, and the outcomes it hands on."""
    added: list[RowRecord] = []
    room = Room()
    slots = WatchedSlots(added, room)
    return Window(1, slots, Handed(added), room), slots, room, added  # type: ignore[arg-type]


async def test_a_row_is_handed_on_before_its_slot_is_free() -> None:
    runs, slots, _, added = watched()
    release = asyncio.Event()
    release.set()
    await runs.launch(row(1, release))
    await runs.launch(row(2, release))
    await runs.finish()
    # Each slot came free with its row's outcome already handed on: the writer's hold never
    # sees a row that is neither running nor unstored.
    assert slots.handed_on_at_give == [1, 2]
    assert [record.row_number for record in added] == [1, 2]


async def test_a_slot_taken_as_the_hold_begins_is_given_back_until_there_is_room() -> None:
    runs, slots, room, added = watched()
    release = asyncio.Event()
    release.set()
    slots.hold_on_take = True
    started = asyncio.create_task(runs.launch(row(1, release)))
    await until(lambda: slots.takes == 1, "the slot taken")
    for _ in range(5):
        await asyncio.sleep(0)
    assert not runs._in_flight and not started.done()  # given back: it waits for room
    assert slots.handed_on_at_give == [0]
    room.let_on()
    await started
    await runs.finish()
    assert slots.takes == 2
    assert [record.row_number for record in added] == [1]
