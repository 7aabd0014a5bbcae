"""The mechanics of looking for work: periodic looks and the answers to wake-up notices,
each in a task of the processing lane, riding out storage outages. What to look for, and
what to do with what is found, is the scheduler's
and its dispatcher's."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from bulkops.engine.outages import Outages
from bulkops.storage.lanes import enter_processing_lane

Look = Callable[[], Awaitable[None]]


class Pollers:
    """The looking tasks of one process, started and stopped together."""

    def __init__(self, outages: Outages) -> None:
        self._outages = outages
        self._notice = asyncio.Event()  # a wake-up notice asked to look for work
        self._tasks: list[asyncio.Task[None]] = []

    def spawn(self, *coroutines: Coroutine[Any, Any, None]) -> None:
        """Run the coroutines as looking tasks (stopped with the others)."""
        self._tasks.extend(asyncio.create_task(c, context=processing()) for c in coroutines)

    def every(self, seconds: float, look: Look) -> None:
        """Look every ``seconds`` (a look that storage fails is tried at the next)."""
        self.spawn(self._every(seconds, look))

    def noticed(self) -> None:
        """A wake-up notice arrived: the looks of ``answer_notices`` run."""
        self._notice.set()

    def answer_notices(self, *looks: Look) -> None:
        """Run ``looks`` in turn at each notice; notices that arrive meanwhile make one more
        round."""
        self.spawn(self._answer(looks))

    def cancel(self) -> None:
        """Stop looking (``wait_stopped`` waits for the tasks to end)."""
        for task in self._tasks:
            task.cancel()

    async def wait_stopped(self) -> None:
        """Wait for the cancelled tasks to end."""
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _every(self, seconds: float, look: Look) -> None:
        while True:
            await asyncio.sleep(seconds)
            await self._outages.quietly(look)

    async def _answer(self, looks: tuple[Look, ...]) -> None:
        while True:
            await self._notice.wait()
            self._notice.clear()
            for look in looks:
                await self._outages.quietly(look)


def processing() -> contextvars.Context:
    """A context whose tasks read in the processing lane (``storage.lanes``)."""
    context = contextvars.copy_context()
    context.run(enter_processing_lane)
    return context
