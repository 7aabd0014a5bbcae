"""Which chunks of split operations a process claims, when, and in what order it runs them.

A split operation's chunks are claimed by any process (``ChunkStore.claim_chunk``: highest
priority first, then oldest). ``ChunkClaims`` decides the claims of one process:

- Turns. A turn claims one chunk and runs it. A process runs one chunk of an operation at a
  time, so within a process the operation's parallelism stays its MaxRowConcurrency, as when
  it is not split; its other chunks are left to other processes, or to this one, chunk after
  chunk. A turn that claimed a chunk starts the next turn, so the chunks keep being drained.
  One turn at a time looks for a chunk (``MAX_CLAIMERS``): news of many chunks starts one
  turn, which starts the next as soon as it claimed one, until a claim finds none. More
  would only queue for the claim, ahead of the claims that even out the shares.
- Claim-ahead. Once the second half of a chunk's rows is being read (``ChunkRange.nearly_done``)
  the next turn starts: its chunk sets up (file, stored rows) meanwhile, and if it is a chunk
  of the same operation its rows run once this one's are done (``ChunkRange`` ``before``),
  while this one's last write and its end are still being stored. The row loop does not sit
  idle while a claim waits behind the writes in flight.
- Runs to equalize. When a tenant is short of its fair part of the process's row slots,
  another chunk of one of its operations runs at once, beside the one running already: its
  ``Equalizer`` (``engine/equalizer.py``) decides when, and runs them through these claims.

A chunk whose holder storage knows alive (``LiveHolders``) is not taken over on the age of
its heartbeat alone, only once it is older than the longer bound those holders get.

It promises that a chunk it claims is run to its end, handed back (``end_chunk`` not done:
on a stop, or when the operation is no longer Running), left for another process to resume
(storage lost), or ends its operation as Failed (resumed more than ``max_resumes`` times);
and that a claimed-ahead chunk runs no row before the rows of the chunk it follows are done.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.chunks import ChunkRange
from bulkops.engine.context import EngineContext
from bulkops.engine.equalizer import Equalizer
from bulkops.engine.ports import WorkTasks
from bulkops.engine.run import Run
from bulkops.engine.scope import StopReason
from bulkops.engine.splits import admit_chunk
from bulkops.errors import StorageError
from bulkops.storage.records import ChunkRecord

if TYPE_CHECKING:
    from bulkops.engine.heartbeat import LiveHolders

log = logging.getLogger("bulkops.engine")

# Chunks a process works on at once at most (one per split operation, one claimed ahead
# each, and those run to equalize tenants): a bound against a runaway, far above what a
# process's row slots can use.
MAX_CHUNK_TURNS = 256
# Turns looking for a chunk at once at most: claims are taken one at a time anyway.
MAX_CLAIMERS = 1


class Holders(Protocol):
    """Which holders' work may be taken (the process's reaper)."""

    def stale_before(self) -> datetime:
        """Heartbeats older than this are abandoned now."""

    async def live_holders(self) -> LiveHolders:
        """The holders storage knows alive, who keep their work past that."""


class ChunkClaims:
    """The chunk claims of one process: its turns, claim-ahead, and runs to equalize.

    ``tasks`` runs its turns as the scheduler's work (so the scheduler knows when it is
    idle); ``holders`` says whose chunks may be taken over.
    """

    def __init__(
        self,
        context: EngineContext,
        holders: Holders,
        *,
        max_resumes: int,
        tasks: WorkTasks,
    ) -> None:
        self._context = context
        self._worker_id = context.config.worker_id
        self._max_resumes = max_resumes
        self._holders = holders
        self._tasks = tasks
        # Chunk runs in progress here, by (operation id, chunk index).
        self.runs: dict[tuple[UUID, int], tuple[Run[ChunkRange], asyncio.Task[None]]] = {}
        self._held: Counter[tuple[UUID, int]] = Counter()  # claimed here: admitted or run
        self._turns = 0  # turns started and not ended
        self._claimers = 0  # turns started that have not claimed a chunk or found none yet
        self._again = False  # news came while a turn looked: it may have looked too early
        self._no_chunk = False  # the last claim found none: no turn tries until news
        # Operations this process runs a chunk of in turn (not counting one whose rows
        # are nearly done); one claim at a time keeps it exact.
        self._chunked: set[UUID] = set()
        # Per operation, the run of the chunk its next chunk claimed in turn follows: that
        # one's rows run once this one's are done (or this run ended).
        self._after: dict[UUID, Run[ChunkRange]] = {}
        self._claiming = asyncio.Lock()
        share = context.share
        # Its runs to equalize (none without a fair share); the scheduler runs it.
        self.equalizer = Equalizer(self, share) if share is not None else None
        self._stopping = False

    @property
    def names(self) -> list[str]:
        """The operations this process can run."""
        return [definition.name for definition in self._context.registry]

    def found(self, count: int) -> int:
        """News of ``count`` claimable chunks (a split, a poll, a notice, workers gone):
        start turns for them, and let runs to equalize try again; how many turns."""
        if self.equalizer is not None:
            self.equalizer.chunks_found()
        return self.offer(count)

    def offer(self, count: int) -> int:
        """Start turns to claim up to ``count`` chunks; how many. A process runs one chunk
        of each split operation at a time (and one claimed ahead), so the turns are bounded
        by the operations, not by ``worker_count``: every split operation progresses."""
        self._no_chunk = False
        free = min(MAX_CHUNK_TURNS - self._turns, MAX_CLAIMERS - self._claimers)
        if count > free:
            self._again = True
        offered = 0 if self._stopping else max(0, min(count, free))
        for _ in range(offered):
            self._turns += 1
            self._claimers += 1
            self._tasks.begin(self._take_turn())
        return offered

    async def poll(self) -> int:
        """Start turns for the chunks this process could claim in turn now (Pending or
        abandoned, of operations it does not run a chunk of in turn already), and say how
        many: a poll while it runs the only split operation there is starts no claim that
        cannot succeed. Runs to equalize that found no chunk hear of their operations'
        chunks too."""
        if self._turns >= MAX_CHUNK_TURNS:
            return 0
        live = await self._holders.live_holders()
        chunks, stale_before = self._context.stores.chunks, self._holders.stale_before()
        waiting = await chunks.chunk_work(
            self.names, stale_before, live.ids, live.before, exclude=set(self._chunked)
        )
        if waiting:
            return self.found(waiting)
        equalizer = self.equalizer
        if (
            equalizer is not None
            and equalizer.waiting_for_chunks
            and await chunks.chunk_work(self.names, stale_before, live.ids, live.before)
        ):
            equalizer.chunks_found()
        return 0

    @property
    def held(self) -> list[tuple[UUID, int]]:
        """The chunks claimed here that are being admitted or run here now."""
        return list(self._held)

    def stop(self) -> None:
        """Claim no more; a chunk claimed ahead is handed back without running a row."""
        self._stopping = True
        if self.equalizer is not None:
            self.equalizer.stop()
        for run, _ in self.runs.values():
            if run.waiting:
                run.stop(StopReason.SHUTDOWN)

    # -- turns -----------------------------------------------------------------------------

    async def _take_turn(self) -> None:
        claimed = offered = False
        try:
            if not self._stopping and not self._no_chunk:
                claimed, offered = await self._run_chunk()
            else:
                self._claimers -= 1
        except StorageError:
            log.warning("Could not claim or process a chunk; will retry later", exc_info=True)
        finally:
            self._turns -= 1
        if claimed and not offered:
            self.offer(1)  # there may be more: keep this slot draining them

    async def _run_chunk(self) -> tuple[bool, bool]:
        """Claim one chunk of an operation not run here in turn, and run it. Returns
        whether a chunk was claimed, and whether the next turn was started before this one
        ended."""
        try:
            async with self._claiming:
                self._again = False
                chunk = await self._claim(exclude=self._chunked)
                if chunk is not None:
                    self._chunked.add(chunk.operation_id)
        finally:
            self._claimers -= 1
        if chunk is None:
            if self._again:  # news while it looked: another turn looks afresh
                self.offer(1)
            else:
                self._no_chunk = True  # until a split, a notice or a poll says otherwise
            return False, False
        self.offer(1)  # a chunk of another operation may be there to claim too
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._chunked.discard(chunk.operation_id)

        try:
            offered = await self._process(chunk, release)
        finally:
            release()
        return True, offered

    async def _claim(
        self, exclude: set[UUID] | None = None, among: list[UUID] | None = None
    ) -> ChunkRecord | None:
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

    async def _process(
        self,
        chunk: ChunkRecord,
        release: Callable[[], None] | None,
        started: asyncio.Event | None = None,
    ) -> bool:
        """Run a claimed chunk; True when the next turn began while its last write was stored.
        A turn's run (``release``: lets another chunk of the operation be claimed in turn)
        follows the operation's run before it here and starts the next turn when its rows
        are nearly done; a run to equalize follows none and starts none. ``started`` is set
        once the run has its place in the row slots (or ended)."""
        key = (chunk.operation_id, chunk.index)
        self._held[key] += 1  # from its claim: a stale chunk held here but not so is an orphan
        run: Run[ChunkRange] | None = None
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
            before = self._after.pop(record.id, None) if release is not None else None
            run = Run(self._context, record, ChunkRange(chunk, before))
            task = asyncio.create_task(run.execute())
            self.runs[key] = (run, task)
            if started is not None:
                await _until(run.joined, task)
                started.set()
            if release is not None:
                await _until(run.scope.nearly_done, task)
                if not task.done() and not self._stopping:
                    self._after[record.id] = run
                    release()
                    offered = self.offer(1) > 0
            await task
        finally:
            self._let_go(key)
            if run is not None:
                run.scope.rows_done.set()  # no more rows of this run will run, however it ended
                if self._after.get(chunk.operation_id) is run:
                    del self._after[chunk.operation_id]  # no chunk of it was claimed meanwhile
                self.runs.pop(key, None)
        return offered

    # -- runs to equalize (the ``Equalizer``'s ``ChunkRunner``) -----------------------------

    @property
    def full(self) -> bool:
        """True when no other chunk run may start: stopping, or ``MAX_CHUNK_TURNS`` run."""
        return self._stopping or self._turns >= MAX_CHUNK_TURNS

    async def claim_among(self, operations: list[UUID]) -> ChunkRecord | None:
        """Claim a chunk of one of ``operations`` (one claim at a time, as turns do)."""
        async with self._claiming:
            return await self._claim(among=operations)

    def run_beside(self, chunk: ChunkRecord, started: asyncio.Event) -> None:
        """Run a claimed chunk at once, following no run and starting no turn."""
        self._turns += 1
        self._held[chunk.operation_id, chunk.index] += 1  # held here before its task starts
        self._tasks.begin(self._run_beside(chunk, started))

    async def _run_beside(self, chunk: ChunkRecord, started: asyncio.Event) -> None:
        try:
            await self._process(chunk, None, started)
        except StorageError:
            log.warning("Could not process a chunk; will retry later", exc_info=True)
        finally:
            started.set()
            self._turns -= 1
            self._let_go((chunk.operation_id, chunk.index))

    def _let_go(self, key: tuple[UUID, int]) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]


async def _until(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait until ``event`` is set or ``task`` has ended."""
    waiter = asyncio.create_task(event.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
