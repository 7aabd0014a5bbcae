"""Running rows (or batches) at once within MaxRowConcurrency, and the failure budget."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

from bulkops.definition.controls import OperationControls
from bulkops.engine.pacing import Slots
from bulkops.engine.recorder import RowRecorder
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
    as many again started and waiting for a rate-limit permit; finished ones are handed to
    ``add`` as they come in."""

    def __init__(
        self,
        limit: int,
        slots: Slots | None,
        add: Callable[[RowRecord], None],
        recorder: RowRecorder,
        timer: Callable[[float], None] | None = None,
    ) -> None:
        self._timer = timer  # told how long each piece of work took
        self._backlog = 2 * limit
        self._slots = slots or Slots(limit)
        self._add = add
        self._recorder = recorder
        self._in_flight: set[asyncio.Task[Result]] = set()
        # Finished tasks arrive here, so collecting one costs the same whether ten or a
        # thousand rows are in flight (asyncio.wait walks them all every time).
        self._finished: asyncio.Queue[asyncio.Task[Result]] = asyncio.Queue()

    async def launch(self, work: Coroutine[Any, Any, Result]) -> None:
        """Start ``work`` once a slot is free (closed unstarted if the wait is cancelled)."""
        try:
            while len(self._in_flight) >= self._backlog:
                await self._collect()
            self._collect_ready()
            await self._slots.take()
        except BaseException:
            work.close()
            raise
        task = asyncio.create_task(self._holding_a_slot(work))
        task.add_done_callback(self._finished.put_nowait)
        self._in_flight.add(task)
        if self._recorder.full:
            await self._recorder.wait_room()

    async def _holding_a_slot(self, work: Coroutine[Any, Any, Result]) -> Result:
        started = time.perf_counter()
        try:
            return await work
        finally:
            self._slots.give()
            if self._timer is not None:
                self._timer(time.perf_counter() - started)

    def _take(self, task: asyncio.Task[Result]) -> None:
        self._in_flight.discard(task)
        result = task.result()
        for record in result if isinstance(result, list) else (result,):
            self._add(record)

    def _collect_ready(self) -> None:
        while not self._finished.empty():
            self._take(self._finished.get_nowait())

    async def _collect(self) -> None:
        self._take(await self._finished.get())
        self._collect_ready()

    async def finish(self) -> None:
        """Wait for everything started."""
        while self._in_flight:
            await self._collect()

    async def cancel(self) -> None:
        """Stop what is still running, keeping what it finished."""
        for task in self._in_flight:
            task.cancel()
        for task in list(self._in_flight):
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if not task.cancelled():
                self._take(task)
        self._in_flight.clear()
