"""Admission of API reads while this process processes rows.

A combined ``serve`` answers requests and records rows on one event loop, in one
interpreter. Clients reading in closed loops (status, list, errors) would take as much of
it as they can, and a read costs the process far more than recording a row: a few such
clients would take most of it from processing. While processing is active here, reads
(GET and HEAD under ``/api/``) are admitted ``limit`` at a time, in the order they came;
the others wait, so the loop's turns between two reads go to processing. A read that has
waited ``max_wait`` seconds goes ahead anyway: the gate delays a read by at most that
much beyond its own time, however many clients read.

A read holds its place until its answer starts: a streamed body (a file, an export) goes
on outside the gate. Reads of an idle process, writes, health checks and metrics are
never held.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUSY_READS = 1  # reads handled at once while processing is active
MAX_WAIT = 0.06  # seconds a read waits for its turn at most
READ_METHODS = frozenset({"GET", "HEAD"})


def _never() -> bool:
    return False


class _Waiter:
    __slots__ = ("future", "timer")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.timer: asyncio.TimerHandle | None = None


class ReadAdmission:
    """The queue of reads: ``limit`` at a time while ``busy()`` says processing is active,
    none held longer than ``max_wait`` seconds."""

    def __init__(self, limit: int = BUSY_READS, max_wait: float = MAX_WAIT) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.max_wait = max_wait
        self._busy: Callable[[], bool] = _never
        self._running = 0  # reads admitted and not finished
        self._waiting: deque[_Waiter] = deque()

    def watch(self, busy: Callable[[], bool]) -> None:
        """Hold reads back while ``busy()`` is true (processing is active here)."""
        self._busy = busy

    @property
    def running(self) -> int:
        """Reads admitted and not finished."""
        return self._running

    @property
    def waiting(self) -> int:
        """Reads waiting for their turn."""
        return len(self._waiting)

    async def enter(self) -> None:
        """Wait for the read's turn (at once when processing is not active); ``leave``
        must follow."""
        if not self._waiting and (self._running < self.limit or not self._busy()):
            self._running += 1
            return
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future())
        waiter.timer = loop.call_later(self.max_wait, self._overdue, waiter)
        self._waiting.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.cancelled():  # not admitted: leave the queue
                self._drop(waiter)
            else:  # admitted just as it was cancelled: give its turn on
                self.leave()
            raise

    def leave(self) -> None:
        """A read admitted by ``enter`` is done: the next one may start."""
        self._running -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiting and (self._running < self.limit or not self._busy()):
            self._start(self._waiting.popleft())

    def _overdue(self, waiter: _Waiter) -> None:
        waiter.timer = None
        if not waiter.future.done():
            self._waiting.remove(waiter)
            self._start(waiter)

    def _start(self, waiter: _Waiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
            waiter.timer = None
        self._running += 1
        waiter.future.set_result(None)

    def _drop(self, waiter: _Waiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        if waiter in self._waiting:
            self._waiting.remove(waiter)


class ReadAdmissionMiddleware:
    """Passes reads of the API through ``admission``, every other request straight on."""

    def __init__(self, app: ASGIApp, admission: ReadAdmission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wait for the read's turn, and give it up when its answer starts."""
        if not _is_read(scope):
            await self.app(scope, receive, send)
            return
        admission = self.admission
        await admission.enter()
        held = True

        async def sending(message: Message) -> None:
            nonlocal held
            if held and message["type"] == "http.response.start":
                held = False
                admission.leave()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if held:
                admission.leave()


def _is_read(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] not in READ_METHODS:
        return False
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path.startswith("/api/")
