"""Schedulers: a process's engine, started and stopped as one: its dispatcher (what runs
next), its reaper (dead holders, stuck and orphaned work), its looks for work (pick-up, polls,
wake-up notices) and its heartbeat."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from bulkops.engine.chunk_runs import ChunkRuns
from bulkops.engine.dispatcher import Dispatcher
from bulkops.engine.polling import Pollers
from bulkops.engine.reaper import Reaper
from bulkops.engine.signals import SignalDelivery
from bulkops.storage.ports import WakeUps
from bulkops.storage.records import OperationRecord
from bulkops.storage.wakeups import NoWakeUps

if TYPE_CHECKING:
    from bulkops.engine.processor import Processor

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
    """The engine of a processing process: it looks for work and hands what it finds to its
    ``Dispatcher`` (``engine/dispatcher.py``), which decides what runs next; its ``Reaper``
    (``engine/reaper.py``) finds dead holders, abandoned and stuck work, and queues the
    operations to take over.

    Pending and Retrying operations are picked up at start and, with a poll interval,
    continuously; claimable chunks at start, at every poll and at every wake-up notice.
    """

    def __init__(self, processor: Processor, config: SchedulerConfig) -> None:
        self._processor = processor
        self._operations = processor.stores.operations
        self._worker_id = processor.config.worker_id
        self._config = config
        self._outages = processor.retry.outages
        self._reaper = Reaper(
            processor,
            self,
            abandon_after=config.abandon_after,
            scan_interval=config.scan_interval,
            stuck_timeout=config.stuck_timeout,
            worker_count=config.worker_count,
            max_resumes=config.max_resumes,
        )
        chunks = ChunkRuns(processor, self._reaper, max_resumes=config.max_resumes)
        self._dispatcher = Dispatcher(processor, self._reaper, chunks)
        self._signals = SignalDelivery(processor.stores.rows, processor.hub)
        self._keeping: asyncio.Task[None] | None = None  # keeps this process known alive
        self._pollers = Pollers(self._outages)  # the looks for work, and their tasks
        self._started = False
        self._stopping = False

    @property
    def worker_id(self) -> str:
        """Identity written into the operations this scheduler holds."""
        return self._worker_id

    @property
    def dispatcher(self) -> Dispatcher:
        """What decides what this process runs next."""
        return self._dispatcher

    def enqueue(self, operation_id: UUID) -> None:
        """Queue an operation unless it is already queued or running here."""
        if not self._stopping:
            self._dispatcher.enqueue(operation_id)

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
        pollers.spawn(self._dispatcher.run())
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
        return self._dispatcher.runs(operation_id)

    async def pickup(self) -> None:
        """Queue the claimable operations found in storage."""
        for record in await self._operations.claimable(_PICKUP_BATCH):
            if self.serves(record):
                self.enqueue(record.id)

    def offer_chunks(self, count: int) -> int:
        """News of ``count`` claimable chunks: start turns to claim them; how many."""
        return self._dispatcher.chunks_found(count)

    def chunks_held(self) -> list[tuple[UUID, int]]:
        """The chunks claimed here that are being admitted or run here now."""
        return self._dispatcher.chunks.held

    async def poll_chunks(self) -> None:
        """Start turns for the chunks any process could claim now (Pending or abandoned)."""
        await self._dispatcher.poll_chunks()

    async def scan_abandoned(self) -> None:
        """Queue abandoned work to take over (see ``Reaper.scan_abandoned``)."""
        await self._reaper.scan_abandoned()

    async def sweep_stuck(self) -> None:
        """Fail operations Running longer than the stuck timeout (``Reaper.sweep_stuck``)."""
        await self._reaper.sweep_stuck()

    async def wait_idle(self) -> None:
        """Return once nothing is queued or running (used by burst mode and tests)."""
        await self._dispatcher.wait_idle()

    @property
    def active(self) -> list[UUID]:
        """Operations being processed right now (whole, or chunks of them)."""
        return self._dispatcher.active

    async def stop(self) -> None:
        """Stop taking work, let running operations finish for up to the shutdown timeout,
        then stop the rest; their finished rows are kept and they go back to Pending."""
        if self._stopping:
            return
        self._stopping = True
        self._pollers.cancel()  # pollers and sweeper
        await self._dispatcher.stop(self._config.shutdown_timeout)
        await self._pollers.wait_stopped()
        await self._processor.heartbeat.close()
        await self._reaper.stop()  # this process stops being known alive: last
        if self._keeping is not None:
            self._keeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeping
        if self._processor.helpers is not None:
            await self._processor.helpers.close()
