"""One writer per process: the finished rows of every run in it, stored together.

Every run of a process (an operation, or a chunk of one) buffers its finished rows in its
own ``RowRecorder``; the process's ``RowWriter`` stores what all of them buffered in one
transaction per write (``RowStore.save_many``), each run's rows fenced on their own. One
write for all runs, not one per run, is what keeps a crash cheap: the process loses the
rows that finished during one write, however many runs it holds, and a loaded database
sees one commit where it saw one per run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bulkops.errors import StorageUnavailable
from bulkops.observability.metrics import Metrics
from bulkops.storage.ports import RowStore
from bulkops.storage.records import ProgressDelta, RowWrite
from bulkops.storage.states import OperationStatus

if TYPE_CHECKING:
    from bulkops.engine.ports import HeldSlots, StorageCalls

log = logging.getLogger("bulkops.engine")

# A write in flight longer than this is slow: every run then waits for it once the
# process's unstored rows reach its limit (``RowWriter``), so a crash during a slow write
# (a loaded or locked database) loses about the rows in flight, not all that ran meanwhile.
SLOW_WRITE = 0.01
# Rows that took less than this many seconds each, per row of the process's limit of
# unstored rows, to fill the write in flight are fast: during a slow write as many rows
# again as it carries may wait behind it (a crash then costs about two writes' rows), so
# that such rows run at the writes' pace instead of stopping at every slow one.
FAST_ROW = 0.001

Outcome = OperationStatus | None | BaseException


@dataclass(frozen=True, slots=True)
class Taken:
    """What a recorder handed to a write: its rows as stored, and how many."""

    write: RowWrite
    rows: int


class Recorder(Protocol):
    """What the writer needs of a run's buffer (``engine/recorder.py``)."""

    @property
    def hold_after(self) -> int:
        """Its part of the process's limit of unstored rows (0: no limit)."""

    @property
    def buffered_rows(self) -> int:
        """Rows buffered, not yet in a write."""

    def take(self) -> Taken | None:
        """The buffered rows as one write (None: nothing buffered)."""

    def stored(self, taken: Taken, outcome: Outcome) -> None:
        """The outcome of the write of ``taken``."""

    def failed(self, error: BaseException) -> None:
        """Its rows could not be stored."""

    def refresh(self) -> None:
        """Hold its producer, or let it on, as the room is now."""


class RowWriter:
    """Stores the rows every recorder of the process buffered, one transaction per write.

    Group commit: a write begins as soon as the one before is done and carries whatever
    every recorder buffered meanwhile, so a finished row waits at most for the write in
    flight before its own begins. Writes overlap processing: a recorder's buffer is taken
    when a write begins and refills meanwhile.

    The writer holds every producer (``RowRecorder.full``) while storage is unreachable
    (no row starts whose outcome could not be stored), and during a write slower than
    ``SLOW_WRITE`` once the process's unstored rows (buffered, and in the write) and those
    running (``slots``) reach the sum of its recorders' ``hold_after``, at most ``most_unstored``
    (the process's row slots): a row that finishes during a slow write keeps its slot
    until it is stored, so a crash then costs at most about the rows of the process's slots,
    running or finished, not all that ran meanwhile. After a slow write, a write of fewer
    rows than that limit is held so from its start. Fast rows (those of the write in flight
    took less than ``FAST_ROW`` seconds each per row of that limit) are held only once as
    many rows again wait behind it: a crash then costs about the rows of two writes.

    A write that fails for another reason than unreachable storage is tried again run by
    run, so one run's bad rows fail that run only; a recorder whose rows could not be
    stored is told so (``Recorder.failed``) and the others go on.
    """

    def __init__(
        self,
        rows: RowStore,
        retry: StorageCalls,
        metrics: Metrics | None = None,
        *,
        most_unstored: int = 0,
        slots: HeldSlots | None = None,
    ) -> None:
        self._rows = rows
        self._retry = retry
        self._metrics = metrics or Metrics()
        self._most_unstored = most_unstored  # 0: the sum of the recorders' hold_after
        self._slots = slots  # the process's row slots: rows running in it right now
        self._recorders: dict[Recorder, None] = {}  # joined, in order of joining
        self._limit = 0  # unstored rows that hold every producer during a slow write
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._buffered = 0  # rows buffered by every recorder, not yet in a write
        self._in_write = 0  # rows of the write in flight
        self._slow = False  # the write in flight is slow (or held from its start)
        self._after_slow = False  # the last write was slow
        self._fast = False  # the rows of the write in flight are fast (``FAST_ROW``)
        self._began = 0.0  # when the write before it began: its rows finished since
        self._stalled = False  # the write in flight met an unreachable storage

    @property
    def open(self) -> bool:
        """True unless every producer must wait: storage unreachable, or a slow write with
        the process's limit of unstored rows reached."""
        if self._stalled:
            return False
        if not (self._slow and self._limit):
            return True
        limit = max(self._limit, 2 * self._in_write) if self._fast else self._limit
        return self._buffered + self._in_write + self._running() < limit

    def _running(self) -> int:
        return self._slots.held if self._slots is not None else 0

    @property
    def slow(self) -> bool:
        """The write in flight has taken longer than ``SLOW_WRITE``, or is held from its
        start after a slow one."""
        return self._slow

    def join(self, recorder: Recorder) -> None:
        """Take ``recorder``'s rows into the writes from now on."""
        self._recorders[recorder] = None
        self._limit = self._hold_limit()
        if self._task is None:
            self._task = asyncio.create_task(self._write_loop())
            self._task.add_done_callback(self._loop_done)

    def leave(self, recorder: Recorder) -> None:
        """Stop taking ``recorder``'s rows (what it still buffers is given up)."""
        if recorder in self._recorders:
            del self._recorders[recorder]
            self._buffered -= recorder.buffered_rows
            self._limit = self._hold_limit()
            self._refresh()
        self._wake.set()

    def rows_done(self, operation: str, delta: ProgressDelta) -> None:
        """Count the rows of a write that was stored."""
        self._metrics.rows_done(operation, delta.successful, delta.failed)

    def added(self, rows: int) -> None:
        """A recorder buffered ``rows`` more rows (the writer waits only while every
        buffer is empty)."""
        self._buffered += rows
        self._wake.set()

    def _hold_limit(self) -> int:
        holds = [recorder.hold_after for recorder in self._recorders]
        if not holds or not all(holds):
            return 0  # a recorder without a limit: none for the process either
        total = sum(holds)
        return min(total, self._most_unstored) if self._most_unstored else total

    def _refresh(self) -> None:
        """Give room back to the recorders that have it again."""
        for recorder in self._recorders:
            recorder.refresh()

    def _overdue(self) -> None:
        """The write in flight is slow: hold the producers once enough rows wait."""
        self._slow = True
        if not self.open:
            self._refresh()

    def _loop_done(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None  # the next recorder to join starts a new loop
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        assert error is not None
        log.error("The row writer failed", exc_info=error)
        for recorder in list(self._recorders):
            recorder.failed(error)

    async def _write_loop(self) -> None:
        while True:
            taken = [(recorder, recorder.take()) for recorder in self._recorders]
            batch = [(recorder, part) for recorder, part in taken if part is not None]
            if not batch:
                if not self._recorders:
                    self._task = None  # as the loop ends: the next recorder starts another
                    return
                self._wake.clear()
                await self._wake.wait()  # a recorder's first row (or its close) wakes it
                continue
            rows = sum(part.rows for _, part in batch)
            self._buffered -= rows
            self._in_write = rows
            began = time.perf_counter()
            self._fast = rows * FAST_ROW > (began - self._began) * self._limit
            self._began = began
            # After a slow write, one of fewer rows than the limit (rows slower than the
            # writes) is held from its start, not once it is slow: rows that start in its
            # first SLOW_WRITE would finish unstored during it. A larger one (fast rows,
            # whose write alone passes the limit) lets the producers refill meanwhile.
            self._slow = self._after_slow and rows < self._limit
            self._refresh()  # the producers refill their buffers during the write
            timer = None
            if self._limit:
                timer = asyncio.get_running_loop().call_later(SLOW_WRITE, self._overdue)
            try:
                outcomes = await self._store([part.write for _, part in batch])
            finally:
                if timer is not None:
                    timer.cancel()
                self._after_slow = time.perf_counter() - began >= SLOW_WRITE
                self._slow, self._in_write = False, 0
            for (recorder, part), outcome in zip(batch, outcomes, strict=True):
                recorder.stored(part, outcome)
            self._refresh()

    async def _store(self, writes: list[RowWrite]) -> Sequence[Outcome]:
        """Each write's stored status (None: not held), or the error that kept it out."""
        started = time.perf_counter()
        try:
            outcomes: Sequence[Outcome] = await self._retry.call(self._save, writes)
        except StorageUnavailable as exc:
            outcomes = [exc] * len(writes)  # storage stayed unreachable: every run stops
        except Exception as exc:
            if len(writes) == 1:
                outcomes = [exc]
            else:
                log.warning("A write of %d runs failed (%s); trying run by run", len(writes), exc)
                outcomes = [await self._alone(write) for write in writes]
        # Every run of the write has its outcome: those storage kept out stop, and a run
        # started later tries storage afresh (held, it would wait for a write that nothing
        # would begin).
        self._stalled = False
        self._metrics.write_took(time.perf_counter() - started)
        return outcomes

    async def _alone(self, write: RowWrite) -> Outcome:
        try:
            return (await self._retry.call(self._save, [write]))[0]
        except Exception as exc:
            return exc

    async def _save(self, writes: list[RowWrite]) -> list[OperationStatus | None]:
        """One try of the write; an unreachable storage holds the producers until a try
        succeeds."""
        try:
            statuses = await self._rows.save_many(writes)
        except StorageUnavailable:
            if not self._stalled:
                self._stalled = True
                self._refresh()
            raise
        if self._stalled:
            self._stalled = False
            self._refresh()
        return statuses
