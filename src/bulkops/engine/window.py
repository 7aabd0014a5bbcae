"""Running rows (or batches) at once within MaxRowConcurrency, and the failure budget."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from bulkops.definition.controls import OperationControls
from bulkops.engine.ports import RowSink
from bulkops.engine.recorder import RowRecorder
from bulkops.engine.slots import Slots
from bulkops.storage.records import RowRecord

Result = RowRecord | list[RowRecord]


class FailureBudget:
    """Counts failed rows as they finish against the operation's tolerated failures.

    Other workers of a split operation fail rows too: ``observe`` takes the stored count
    (which includes theirs) whenever the run sees the operation.
    """

    def __init__(self, controls: OperationControls, total: int, failed: int) -> None:
        self._controls = controls
        self._total = total
        self._stored = failed
        self._here = 0  # failed here since the run started
        self.exceeded = controls.failure_limit_passed(failed, total)

    @property
    def failed(self) -> int:
        """The best known count of failed rows."""
        return self._stored + self._here

    def note_failure(self) -> None:
        """One more row failed here."""
        self._here += 1
        self._check()

    def observe(self, stored_failed: int, flushed_here: int) -> None:
        """The operation's stored failures, of which ``flushed_here`` came from this run."""
        self._stored = max(self._stored, stored_failed - flushed_here)
        self._check()

    def _check(self) -> None:
        if self.exceeded is None:
            self.exceeded = self._controls.failure_limit_passed(self.failed, self._total)


class Window:
    """Up to ``limit`` rows (or batches) running at once, each holding a slot, with at most
    as many again started and waiting for a rate-limit permit.

    A row's outcome is handed to ``sink`` the moment it finishes, whatever the producer is
    waiting for (a slot of the process's share, room in the recorder): a finished row that
    waited in memory until its run got its next slot would be neither stored nor counted by
    the writer's hold, and a crash would run it again. A row that raised is handed to the
    producer instead, which raises it at its next launch (or in ``finish``).
    """

    def __init__(
        self,
        limit: int,
        slots: Slots | None,
        sink: RowSink,
        recorder: RowRecorder,
        timer: Callable[[float], None] | None = None,
    ) -> None:
        self._timer = timer  # told how long each piece of work took
        self._backlog = 2 * limit
        self._slots = slots or Slots(limit)
        self._sink = sink  # where a row's record goes once it ended
        self._recorder = recorder
        self._in_flight: set[asyncio.Task[Result]] = set()  # started, outcome not handed on
        self._raised: deque[asyncio.Task[Result]] = deque()  # ended with an exception
        self._settled = asyncio.Event()  # a task left ``_in_flight`` or raised

    async def launch(self, work: Coroutine[Any, Any, Result]) -> None:
        """Start ``work`` once a slot is free (closed unstarted if the wait is cancelled)."""
        try:
            while len(self._in_flight) >= self._backlog:
                await self._settle()
            self._raise_failed()
            await self._take_slot()
        except BaseException:
            work.close()
            raise
        task = asyncio.create_task(self._holding_a_slot(work))
        task.add_done_callback(self._ended)
        self._in_flight.add(task)
        if self._recorder.full:
            await self._recorder.wait_room()

    async def _take_slot(self) -> None:
        """Take a slot while the writer lets the producer on: no slot is taken while it
        holds the producer, and one that came free while the hold began is given back."""
        while True:
            if self._recorder.full:
                await self._recorder.wait_room()
            await self._slots.take()
            if not self._recorder.full:
                return
            self._slots.give()

    async def _holding_a_slot(self, work: Coroutine[Any, Any, Result]) -> Result:
        started = time.perf_counter()
        try:
            result = await work
            # Handed on before the slot is free: the writer's hold counts the row as
            # unstored from the moment it stops counting as running, never neither.
            task = asyncio.current_task()
            if task in self._in_flight:
                self._in_flight.discard(task)
                self._hand_on(result)
            return result
        finally:
            self._slots.give()
            if self._timer is not None:
                self._timer(time.perf_counter() - started)

    def _ended(self, task: asyncio.Task[Result]) -> None:
        """A task ended: its outcome goes on now; an exception waits for the producer."""
        if task in self._in_flight:  # not handed on already (by the task, or ``cancel``)
            if task.cancelled() or task.exception() is not None:
                self._raised.append(task)
            else:
                self._take(task)
        self._settled.set()

    def _take(self, task: asyncio.Task[Result]) -> None:
        self._in_flight.discard(task)
        self._hand_on(task.result())

    def _hand_on(self, result: Result) -> None:
        for record in result if isinstance(result, list) else (result,):
            self._sink.record(record)

    def _raise_failed(self) -> None:
        """Raise the exception of a task that ended with one."""
        while self._raised:
            task = self._raised.popleft()
            if task in self._in_flight:
                self._take(task)

    async def _settle(self) -> None:
        """Wait until a task ends (its outcome handed on, or its exception raised)."""
        self._raise_failed()
        self._settled.clear()
        await self._settled.wait()
        self._raise_failed()

    async def finish(self) -> None:
        """Wait for everything started."""
        while self._in_flight:
            await self._settle()

    async def cancel(self) -> None:
        """Stop what is still running, keeping what it finished."""
        for task in self._in_flight:
            task.cancel()
        for task in list(self._in_flight):
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if not task.cancelled() and task in self._in_flight:
                self._take(task)
        self._in_flight.clear()
        self._raised.clear()
