"""Schedulers: which operations a process works on, and how many at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.events import finished, status_changed
from bulkops.engine.processor import OperationRun, Processor, StopReason
from bulkops.errors import StorageError
from bulkops.storage.states import CLAIMABLE_STATUSES, OperationStatus

log = logging.getLogger("bulkops.engine")

_PICKUP_BATCH = 1000


class Scheduler(Protocol):
    """Accepts operations to process. The API calls ``enqueue`` after create and retry."""

    def enqueue(self, operation_id: UUID) -> None:
        """Ask for an operation to be processed soon (duplicates are ignored)."""

    async def start(self) -> None:
        """Begin processing (startup pickup, pollers)."""

    async def stop(self) -> None:
        """Drain in-flight work, then release what could not finish; idempotent."""


class NullScheduler:
    """The scheduler of an API-only instance: it never processes anything, so created
    operations stay Pending until a worker claims them."""

    def enqueue(self, operation_id: UUID) -> None:
        """Ignore the request."""

    async def start(self) -> None:
        """Nothing to start."""

    async def stop(self) -> None:
        """Nothing to stop."""


class WorkScheduler:
    """Processes up to ``worker_count`` operations at once.

    An operation is claimed with its concurrency token before processing; when another
    process claimed it first the claim fails and the operation is skipped. Pending and
    Retrying operations are picked up at start and, with ``poll_interval``, continuously.
    """

    def __init__(
        self,
        processor: Processor,
        *,
        worker_count: int,
        poll_interval: float | None = None,
        stuck_timeout: float | None = None,
        shutdown_timeout: float = 30.0,
    ) -> None:
        self._processor = processor
        self._operations = processor.stores.operations
        self._events = processor.stores.events
        self._worker_id = processor.config.worker_id
        self._worker_count = worker_count
        self._poll_interval = poll_interval
        self._stuck_timeout = stuck_timeout
        self._shutdown_timeout = shutdown_timeout
        self._queue: asyncio.Queue[UUID] = asyncio.Queue()
        self._known: set[UUID] = set()
        self._active: dict[UUID, tuple[OperationRun, asyncio.Task[None]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopping = False

    @property
    def worker_id(self) -> str:
        """Identity written into the operations this scheduler holds."""
        return self._worker_id

    def enqueue(self, operation_id: UUID) -> None:
        """Queue an operation unless it is already queued or running here."""
        if self._stopping or operation_id in self._known:
            return
        self._known.add(operation_id)
        self._queue.put_nowait(operation_id)

    async def start(self) -> None:
        """Start the slots, pick up waiting work, and start the poller and sweeper."""
        if self._started:
            return
        self._started = True
        self._spawn(*(self._slot() for _ in range(self._worker_count)))
        await self.pickup()
        if self._poll_interval:
            self._spawn(self._every(self._poll_interval, self.pickup))
        if self._stuck_timeout:
            interval = min(max(self._stuck_timeout / 4, 0.2), 60.0)
            self._spawn(self._every(interval, self.sweep_stuck))

    def _spawn(self, *coroutines: Coroutine[Any, Any, None]) -> None:
        self._tasks.extend(asyncio.create_task(c) for c in coroutines)

    async def pickup(self) -> None:
        """Queue the Pending and Retrying operations found in storage."""
        try:
            waiting = await self._operations.claimable(_PICKUP_BATCH)
        except StorageError:
            log.warning("Could not query waiting operations; will try again", exc_info=True)
            return
        for record in waiting:
            self.enqueue(record.id)

    async def sweep_stuck(self) -> None:
        """Fail operations that have been Running longer than the stuck timeout."""
        if not self._stuck_timeout:
            return
        now = utcnow()
        for record in await self._operations.running():
            since = record.started_at or record.created_at
            if (now - since).total_seconds() <= self._stuck_timeout:
                continue
            updated = await self._operations.transition(
                record.id,
                OperationStatus.FAILED,
                now,
                error_message=(
                    f"Operation was Running longer than the stuck-operation timeout "
                    f"({self._stuck_timeout:g} s)"
                ),
            )
            if updated is not None:
                log.warning("Failed stuck operation %s", record.id)
                await self._events.append([finished(updated, now)])

    async def _every(self, seconds: float, action: Any) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await action()
            except StorageError:
                log.warning("Periodic %s failed", action.__name__, exc_info=True)

    async def _slot(self) -> None:
        while True:
            operation_id = await self._queue.get()
            try:
                if not self._stopping:
                    await self._handle(operation_id)
            except StorageError:
                log.warning("Could not process %s; will retry later", operation_id, exc_info=True)
            finally:
                self._known.discard(operation_id)
                self._active.pop(operation_id, None)
                self._queue.task_done()

    async def _handle(self, operation_id: UUID) -> None:
        record = await self._operations.get(operation_id)
        if record is None or record.status not in CLAIMABLE_STATUSES:
            return
        if record.operation_name not in self._processor.registry:
            # Another worker sharing this storage may serve it: leave it to that one.
            log.debug("Skipping %s: %r is not registered here", record.id, record.operation_name)
            return
        now = utcnow()
        claimed = await self._operations.claim(operation_id, record.version, self._worker_id, now)
        if claimed is None:
            log.info("Operation %s was claimed by another worker; skipping", operation_id)
            return
        await self._events.append([status_changed(claimed, record.status, now)])
        run = self._processor.start(claimed, retry=record.status is OperationStatus.RETRYING)
        task = asyncio.create_task(run.execute())
        self._active[operation_id] = (run, task)
        await task

    async def wait_idle(self) -> None:
        """Return once nothing is queued or running (used by burst mode and tests)."""
        await self._queue.join()

    @property
    def active(self) -> list[UUID]:
        """Operations being processed right now."""
        return list(self._active)

    async def stop(self) -> None:
        """Stop taking work, let running operations finish for up to the shutdown timeout,
        then stop the rest; their finished rows are kept and they go back to Pending."""
        if self._stopping:
            return
        self._stopping = True
        for task in self._tasks[self._worker_count :]:
            task.cancel()  # poller and sweeper
        running = [task for _, task in self._active.values()]
        if running and self._shutdown_timeout > 0:
            await asyncio.wait(running, timeout=self._shutdown_timeout)
        for run, task in list(self._active.values()):
            if not task.done():
                run.stop(StopReason.SHUTDOWN)
        remaining = [task for _, task in self._active.values()]
        if remaining:
            await asyncio.gather(*remaining, return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
