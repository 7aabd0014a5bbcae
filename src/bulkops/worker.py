"""Processing without HTTP: the ``bulkops worker`` role, also usable from code."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.scheduler import WorkScheduler
from bulkops.runtime import Runtime, build_registry
from bulkops.service.signals import SignalService
from bulkops.settings import Settings


class Worker:
    """Claims Pending and Retrying operations from shared storage and processes them.

    Example:
        worker = bulkops.Worker(settings=bulkops.Settings(database_url=...))
        await worker.run()          # until stop() is called
        await worker.run_until_idle()  # or: process what is waiting, then return
    """

    def __init__(
        self,
        operations: Sequence[type | OperationDefinition] | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.registry = build_registry(operations, self.settings)
        self._runtime: Runtime | None = None
        self._stop = asyncio.Event()

    @property
    def runtime(self) -> Runtime:
        """The running runtime (after ``start``)."""
        if self._runtime is None:
            raise RuntimeError("Worker is not started")
        return self._runtime

    @property
    def signals(self) -> SignalService:
        """Signal rows waiting in this worker by their full scoped key."""
        return self.runtime.signals

    async def start(self) -> None:
        """Open storage and start processing (startup pickup, pollers)."""
        if self._runtime is None:
            self._runtime = await Runtime.open(self.settings, self.registry, role="worker")
            await self._runtime.start()

    def stop(self) -> None:
        """Ask ``run`` to drain and return; idempotent and safe from signal handlers."""
        self._stop.set()

    async def close(self) -> None:
        """Drain in-flight work (releasing what cannot finish) and close storage."""
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            await runtime.close()

    async def run(self) -> None:
        """Process until ``stop`` is called, then drain and close."""
        await self.start()
        try:
            await self._stop.wait()
        finally:
            await self.close()

    async def run_until_idle(self) -> None:
        """Process every operation waiting now, then close (burst mode)."""
        await self.start()
        try:
            scheduler = self.runtime.scheduler
            if isinstance(scheduler, WorkScheduler):
                await scheduler.wait_idle()
        finally:
            await self.close()
