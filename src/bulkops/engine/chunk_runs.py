"""How a process claims a chunk of a split operation and runs it; when it does is its
dispatcher's (``engine/dispatcher.py``, whose ``ChunkWork`` this is).

A chunk is claimed from storage (``ChunkStore.claim_chunk``: highest priority first, then
oldest), one claim at a time in a process. A chunk whose holder storage knows alive
(``LiveHolders``) is not taken over on the age of its heartbeat alone, only once it is older
than the longer bound those holders get.

A chunk run in turn (``InTurn``) follows the run of the operation's chunk before it here,
when that one was still running as it was claimed: its rows run once that one's are done
(``ChunkRange`` ``before``), while that one's last write and its end are still being
stored. Once the second half of its own rows is being read (``ChunkRange.nearly_done``) it
tells its turn, so that the next chunk can be claimed ahead. A chunk run beside, to even out
the tenants, follows none and tells none.

``ChunkRuns`` promises that a chunk it claims is run to its end, handed back (``end_chunk``
not done: on a stop, or when the operation is no longer Running), left for another process
to resume (storage lost), or ends its operation as Failed (resumed more than
``max_resumes`` times); and that a claimed-ahead chunk runs no row before the rows of the
chunk it follows are done.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.chunks import ChunkRange
from bulkops.engine.context import EngineContext
from bulkops.engine.ports import InTurn
from bulkops.engine.run import Run
from bulkops.engine.scope import StopReason
from bulkops.engine.splits import admit_chunk
from bulkops.storage.records import ChunkRecord

if TYPE_CHECKING:
    from bulkops.engine.heartbeat import LiveHolders

log = logging.getLogger("bulkops.engine")


class Holders(Protocol):
    """Which holders' work may be taken (the process's reaper)."""

    def stale_before(self) -> datetime:
        """Heartbeats older than this are abandoned now."""

    async def live_holders(self) -> LiveHolders:
        """The holders storage knows alive, who keep their work past that."""


class ChunkRuns:
    """The chunks one process has claimed: their claims, their runs and claim-ahead."""

    def __init__(self, context: EngineContext, holders: Holders, *, max_resumes: int) -> None:
        self._context = context
        self._worker_id = context.config.worker_id
        self._max_resumes = max_resumes
        self._holders = holders
        # Chunk runs in progress here, by (operation id, chunk index).
        self.runs: dict[tuple[UUID, int], tuple[Run[ChunkRange], asyncio.Task[None]]] = {}
        self._held: Counter[tuple[UUID, int]] = Counter()  # claimed here: admitted or run
        # Per operation, the run of the chunk its next chunk claimed in turn follows: that
        # one's rows run once this one's are done (or this run ended).
        self._after: dict[UUID, Run[ChunkRange]] = {}
        self._claiming = asyncio.Lock()
        self._stopping = False

    @property
    def names(self) -> list[str]:
        """The operations this process can run."""
        return [definition.name for definition in self._context.registry]

    @property
    def held(self) -> list[tuple[UUID, int]]:
        """The chunks claimed here that are being admitted or run here now."""
        return list(self._held)

    async def waiting(self, exclude: set[UUID] | None = None) -> int:
        """How many chunks this process could claim now (Pending or abandoned), not
        counting those of ``exclude``."""
        live = await self._holders.live_holders()
        return await self._context.stores.chunks.chunk_work(
            self.names,
            self._holders.stale_before(),
            live.ids,
            live.before,
            exclude=exclude or set(),
        )

    async def claim(
        self, exclude: set[UUID] | None = None, among: list[UUID] | None = None
    ) -> ChunkRecord | None:
        """Claim a chunk, not of ``exclude``, or only of ``among``; one claim at a time."""
        async with self._claiming:
            live = await self._holders.live_holders()
            return await self._context.stores.chunks.claim_chunk(
                self.names,
                self._worker_id,
                utcnow(),
                self._holders.stale_before(),
                exclude=exclude or (),
                among=among,
                alive=live.ids,
                alive_before=live.before,
            )

    def hold(self, chunk: ChunkRecord) -> None:
        """Count a claimed chunk held here until ``let_go`` (before its run starts)."""
        self._held[chunk.operation_id, chunk.index] += 1

    def let_go(self, chunk: ChunkRecord) -> None:
        """A chunk counted by ``hold`` is no longer held here."""
        key = (chunk.operation_id, chunk.index)
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]

    def stop(self) -> None:
        """Run no further chunk; a chunk claimed ahead is handed back without running a
        row."""
        self._stopping = True
        for run, _ in self.runs.values():
            if run.waiting:
                run.stop(StopReason.SHUTDOWN)

    async def run(
        self,
        chunk: ChunkRecord,
        turn: InTurn | None,
        started: asyncio.Event | None = None,
    ) -> bool:
        """Run a claimed chunk; True when its ``turn`` began the next while its last write
        was stored. A chunk run in turn follows the operation's run before it here and tells
        its turn when its rows are nearly done; a chunk run beside (``turn`` None) follows
        none and tells none. ``started`` is set once the run has its place in the row slots
        (or ended)."""
        self.hold(chunk)  # from its claim: a stale chunk held here but not so is an orphan
        run: Run[ChunkRange] | None = None
        key = (chunk.operation_id, chunk.index)
        offered = False
        try:
            record = await admit_chunk(self._context, chunk, self._max_resumes)
            if record is None:
                return False
            log.info(
                "Processing chunk %d (rows %d-%d) of operation %s",
                chunk.index,
                chunk.first_row,
                chunk.last_row,
                record.id,
            )
            before = self._after.pop(record.id, None) if turn is not None else None
            run = Run(self._context, record, ChunkRange(chunk, before))
            task = asyncio.create_task(run.execute())
            self.runs[key] = (run, task)
            if started is not None:
                await _until(run.joined, task)
                started.set()
            if turn is not None:
                await _until(run.scope.nearly_done, task)
                if not task.done() and not self._stopping:
                    self._after[record.id] = run
                    offered = turn.nearly_done()
            await task
        finally:
            self.let_go(chunk)
            if run is not None:
                run.scope.rows_done.set()  # no more rows of this run will run, however it ended
                if self._after.get(chunk.operation_id) is run:
                    del self._after[chunk.operation_id]  # no chunk of it was claimed meanwhile
                self.runs.pop(key, None)
        return offered


async def _until(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait until ``event`` is set or ``task`` has ended."""
    waiter = asyncio.create_task(event.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
