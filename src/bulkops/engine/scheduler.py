"""Schedulers: which operations a process works on, and how many at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.chunk_claims import ChunkClaims
from bulkops.engine.persistence import apply_change
from bulkops.engine.polling import Pollers, processing
from bulkops.engine.reaper import Reaper
from bulkops.engine.run import Run
from bulkops.engine.scope import StopReason
from bulkops.engine.signals import SignalDelivery
from bulkops.errors import IllegalTransition, StorageError
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.ports import WakeUps
from bulkops.storage.records import OperationRecord
from bulkops.storage.wakeups import NoWakeUps

if TYPE_CHECKING:
    from bulkops.engine.processor import Processor, WholeOperation

log = logging.getLogger("bulkops.engine")

_PICKUP_BATCH = 1000
# Operations a process works on at once at most: a bound against a runaway (open files,
# heartbeats, connections), far above what its row slots can keep busy; the rest wait here
# in order.
MAX_OPERATIONS = 256


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
    operations stay Pending until a worker claims them; it announces them to workers."""

    def __init__(self, wakeups: WakeUps | None = None) -> None:
        self._wakeups = wakeups or NoWakeUps()
        self._announcing: set[asyncio.Task[None]] = set()

    def enqueue(self, operation_id: UUID) -> None:
        """Announce the work to the workers (they also find it by polling)."""
        task = asyncio.create_task(self._wakeups.announce_work())
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def start(self) -> None:
        """Nothing to start."""

    async def stop(self) -> None:
        """Nothing to stop."""


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """When a scheduler looks for work, and how long it lets others hold theirs."""

    worker_count: int
    poll_interval: float | None = None  # Pending/Retrying poll; None: off
    stuck_timeout: float | None = None
    shutdown_timeout: float = 30.0
    abandon_after: float = 30.0
    scan_interval: float = 5.0  # the abandoned-operation scan (the heartbeat interval)
    max_resumes: int = 5


class WorkScheduler:
    """Processes every operation it can claim, and a chunk of every split operation, at
    once: none waits for another to end. Which chunks it claims, and when, its
    ``ChunkClaims`` decides (``engine/chunk_claims.py``); how many rows run at once is the
    processor's ``FairShare`` (``engine/fair_share.py``), which decides which run's row goes
    next.

    An operation is claimed with its concurrency token before processing; when another
    process claimed it first the claim fails and the operation is skipped. Pending and
    Retrying operations are picked up at start and, with a poll interval, continuously.
    Abandoned operations (held, but their holder's heartbeat stopped) are resumed: its
    ``Reaper`` (``engine/reaper.py``) finds them, dead holders and stuck operations, and
    queues here the ones to take over.
    """

    def __init__(self, processor: Processor, config: SchedulerConfig) -> None:
        self._processor = processor
        self._operations = processor.stores.operations
        self._worker_id = processor.config.worker_id
        self._config = config
        self._outages = processor.retry.outages
        self._work: set[asyncio.Task[None]] = set()  # operations and chunk turns in progress
        self._operations_here = 0  # operations being claimed or processed here
        self._later: deque[UUID] = deque()  # queued beyond MAX_OPERATIONS
        self._idle = asyncio.Event()
        self._idle.set()
        self._known: set[UUID] = set()
        # Runs of whole operations in progress, by operation id (chunks: ``_chunks.runs``).
        self._active: dict[UUID, tuple[Run[WholeOperation], asyncio.Task[None]]] = {}
        self._reaper = Reaper(
            processor,
            self,
            abandon_after=config.abandon_after,
            scan_interval=config.scan_interval,
            stuck_timeout=config.stuck_timeout,
            worker_count=config.worker_count,
            max_resumes=config.max_resumes,
        )
        self._chunks = ChunkClaims(
            processor, self._reaper, max_resumes=config.max_resumes, tasks=self
        )
        self._signals = SignalDelivery(processor.stores.rows, processor.hub)
        self._keeping: asyncio.Task[None] | None = None  # keeps this process known alive
        self._pollers = Pollers(self._outages)  # the looks for work, and their tasks
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
        if self._operations_here >= MAX_OPERATIONS:
            self._later.append(operation_id)  # started as one here ends
            return
        self._start_operation(operation_id)

    def _start_operation(self, operation_id: UUID) -> None:
        self._operations_here += 1
        self.begin(self._take_operation(operation_id))

    def begin(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as this process's processing: ``wait_idle`` waits for it."""
        task = asyncio.create_task(work, context=processing())
        self._work.add(task)
        self._idle.clear()
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._work.discard(task)
        if not self._work:
            self._idle.set()

    async def start(self) -> None:
        """Pick up waiting and abandoned work, and start the pollers."""
        if self._started:
            return
        self._started = True
        config = self._config
        self._keeping = asyncio.create_task(self._processor.stores.liveness.keep(self._worker_id))
        await self._outages.quietly(self.pickup)
        await self._outages.quietly(self.scan_abandoned)
        await self._outages.quietly(self.poll_chunks)
        pollers = self._pollers
        if config.poll_interval:
            pollers.every(config.poll_interval, self.pickup)
        pollers.every(config.poll_interval or config.scan_interval, self.poll_chunks)
        if self._chunks.equalizer is not None:
            pollers.spawn(self._chunks.equalizer.run())
        pollers.every(config.scan_interval, self.scan_abandoned)
        # Other processes' notices (PostgreSQL); the pollers stay the fallback.
        pollers.spawn(self._processor.stores.wakeups.listen(pollers.noticed, self._signals.heard))
        pollers.answer_notices(self.pickup, self.poll_chunks)
        if config.stuck_timeout:
            interval = min(max(config.stuck_timeout / 4, 0.2), 60.0)
            pollers.every(interval, self.sweep_stuck)

    def serves(self, record: OperationRecord) -> bool:
        """Whether this process runs operations of that name (another worker sharing this
        storage may serve it: it is left to that one)."""
        return record.operation_name in self._processor.registry

    def runs(self, operation_id: UUID) -> bool:
        """Whether the operation is run here now, whole."""
        return operation_id in self._active

    async def pickup(self) -> None:
        """Queue the claimable operations found in storage."""
        for record in await self._operations.claimable(_PICKUP_BATCH):
            if self.serves(record):
                self.enqueue(record.id)

    def offer_chunks(self, count: int) -> int:
        """News of ``count`` claimable chunks: start turns to claim them; how many."""
        return self._chunks.found(count)

    def chunks_held(self) -> list[tuple[UUID, int]]:
        """The chunks claimed here that are being admitted or run here now."""
        return self._chunks.held

    async def poll_chunks(self) -> None:
        """Start turns for the chunks any process could claim now (Pending or abandoned)."""
        await self._chunks.poll()

    async def scan_abandoned(self) -> None:
        """Queue abandoned work to take over (see ``Reaper.scan_abandoned``)."""
        await self._reaper.scan_abandoned()

    async def sweep_stuck(self) -> None:
        """Fail operations Running longer than the stuck timeout (``Reaper.sweep_stuck``)."""
        await self._reaper.sweep_stuck()

    async def _stop_keeping(self) -> None:
        """This process stops being known alive: last, once its work is handed back."""
        await self._reaper.stop()
        if self._keeping is not None:
            self._keeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeping

    async def _apply(
        self, operation_id: UUID, compute: Callable[[OperationRecord], OperationChange | None]
    ) -> OperationRecord | None:
        try:
            return await apply_change(self._operations, operation_id, compute)
        except IllegalTransition:
            return None

    async def _take_operation(self, operation_id: UUID) -> None:
        try:
            if not self._stopping:
                await self._handle(operation_id)
        except StorageError:
            log.warning("Could not process %s; will retry later", operation_id, exc_info=True)
        finally:
            self._known.discard(operation_id)
            self._reaper.forget(operation_id)
            self._active.pop(operation_id, None)
            self._operations_here -= 1
            if self._later and not self._stopping:
                self._start_operation(self._later.popleft())

    async def _handle(self, operation_id: UUID) -> None:
        record = await self._operations.get(operation_id)
        if record is None or not self.serves(record):
            return
        now = utcnow()
        if self._reaper.to_take_over(operation_id):
            claimed = await self._reaper.take_over(record, self._worker_id, now)
        else:
            claimed = await self._apply(
                operation_id,
                lambda current: (
                    lifecycle.claim(current, self._worker_id, now)
                    if current.worker_id is None
                    else None
                ),
            )
        if claimed is None or claimed.worker_id != self._worker_id:
            log.info("Operation %s was taken by another worker; skipping", operation_id)
            return
        run = self._processor.start(claimed)
        task = asyncio.create_task(run.execute())
        self._active[operation_id] = (run, task)
        await task
        if run.scope.chunks:
            self.offer_chunks(run.scope.chunks)

    async def wait_idle(self) -> None:
        """Return once nothing is queued or running (used by burst mode and tests)."""
        await self._idle.wait()

    @property
    def active(self) -> list[UUID]:
        """Operations being processed right now (whole, or chunks of them)."""
        found = [*self._active, *(operation for operation, _ in self._chunks.runs)]
        return list(dict.fromkeys(found))

    def _runs(self) -> list[tuple[Run[Any], asyncio.Task[None]]]:
        return [*self._active.values(), *self._chunks.runs.values()]

    async def stop(self) -> None:
        """Stop taking work, let running operations finish for up to the shutdown timeout,
        then stop the rest; their finished rows are kept and they go back to Pending."""
        if self._stopping:
            return
        self._stopping = True
        self._pollers.cancel()  # pollers and sweeper
        self._chunks.stop()  # no more claims; a chunk claimed ahead is handed back
        running = [task for _, task in self._runs()]
        if running and self._config.shutdown_timeout > 0:
            await asyncio.wait(running, timeout=self._config.shutdown_timeout)
        for run, task in self._runs():
            if not task.done():
                run.stop(StopReason.SHUTDOWN)
        remaining = [task for _, task in self._runs()]
        if remaining:
            await asyncio.gather(*remaining, return_exceptions=True)
        # Claims and turns that were starting as the stop came, then the pollers.
        await asyncio.gather(*self._work, return_exceptions=True)
        await self._pollers.wait_stopped()
        await self._processor.heartbeat.close()
        await self._stop_keeping()
        if self._processor.helpers is not None:
            await self._processor.helpers.close()
