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
- Claim-ahead. Once the second half of a chunk's rows is being read (``ChunkRun.nearly_done``)
  the next turn starts: its chunk sets up (file, stored rows) meanwhile, and if it is a chunk
  of the same operation its rows run once this one's are done (``ChunkRun`` ``before``),
  while this one's last write and its end are still being stored. The row loop does not sit
  idle while a claim waits behind the writes in flight.
- Runs to equalize. When the process's row slots are contended and a tenant is below its
  fair part of them because its runs are at their caps (``FairShare.short_of_share``), the
  process claims another chunk of one of that tenant's operations and runs it at once,
  beside the one it runs already. One such claim at a time, each counted before the next is
  decided; when its run ends the share decides afresh. An operation alone, or beside runs
  that leave slots free, is never run more than one chunk at a time this way.

A chunk whose holder storage knows alive (``LiveHolders``) is not taken over on the age of
its heartbeat alone, only once it is older than the longer bound those holders get.

It promises that a chunk it claims is run to its end, handed back (``end_chunk`` not done:
on a stop, or when the operation is no longer Running), left for another process to resume
(storage lost), or ends its operation as Failed (resumed more than ``max_resumes`` times);
and that a claimed-ahead chunk runs no row before the rows of the chunk it follows are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.chunks import ChunkRun, end_split
from bulkops.engine.fair_share import FairShare
from bulkops.engine.lease import LiveHolders
from bulkops.engine.processor import Processor
from bulkops.engine.run import StopReason
from bulkops.errors import StorageError
from bulkops.storage.records import ChunkRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")

# Chunks a process works on at once at most (one per split operation, one claimed ahead
# each, and those run to equalize tenants): a bound against a runaway, far above what a
# process's row slots can use.
MAX_CHUNK_TURNS = 256
# Turns looking for a chunk at once at most: claims are taken one at a time anyway.
MAX_CLAIMERS = 1
# Seconds between looks at the share when nothing changed in it: a run's pace (rows
# waiting for a rate limit, say) changes without telling it.
LOOK_AGAIN = 0.5


class Holders(Protocol):
    """Which holders' work may be taken (the process's reaper)."""

    def stale_before(self) -> datetime:
        """Heartbeats older than this are abandoned now."""

    async def live_holders(self) -> LiveHolders:
        """The holders storage knows alive, who keep their work past that."""


class ChunkClaims:
    """The chunk claims of one process: its turns, claim-ahead, and runs to equalize.

    ``begin`` starts a coroutine as the scheduler's work (so the scheduler knows when it is
    idle); ``holders`` says whose chunks may be taken over.
    """

    def __init__(
        self,
        processor: Processor,
        holders: Holders,
        *,
        max_resumes: int,
        begin: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._processor = processor
        self._worker_id = processor.config.worker_id
        self._max_resumes = max_resumes
        self._holders = holders
        self._begin = begin
        # Chunk runs in progress here, by (operation id, chunk index).
        self.runs: dict[tuple[UUID, int], tuple[ChunkRun, asyncio.Task[None]]] = {}
        self._turns = 0  # turns started and not ended
        self._claimers = 0  # turns started that have not claimed a chunk or found none yet
        # News came while a turn was looking: it may have looked too early, look again.
        self._again = False
        self._no_chunk = False  # the last claim found none: no turn tries until news
        # Operations this process runs a chunk of in turn (not counting one whose rows
        # are nearly done); one claim at a time keeps it exact.
        self._chunked: set[UUID] = set()
        # Per operation, the run of the chunk its next chunk claimed in turn follows: that
        # one's rows run once this one's are done (or this run ended).
        self._after: dict[UUID, ChunkRun] = {}
        self._claiming = asyncio.Lock()
        # Operations a claim to equalize found no chunk of, until news of chunks.
        self._dry: set[UUID] = set()
        self._news = asyncio.Event()  # the share changed, or chunks may be claimable
        self._stopping = False

    @property
    def names(self) -> list[str]:
        """The operations this process can run."""
        return [definition.name for definition in self._processor.registry]

    def found(self, count: int) -> int:
        """News of ``count`` claimable chunks (a split, a poll, a notice, workers gone):
        start turns for them, and let runs to equalize try again; how many turns."""
        self._dry.clear()
        self._news.set()
        return self.offer(count)

    def offer(self, count: int) -> int:
        """Start turns to claim up to ``count`` chunks; how many. A process runs one chunk
        of each split operation at a time (and one claimed ahead), so the turns are bounded
        by the operations, not by ``worker_count``: every split operation progresses."""
        self._no_chunk = False
        free = min(MAX_CHUNK_TURNS - self._turns, MAX_CLAIMERS - self._claimers)
        if count > free:
            self._again = True
        offered = 0
        for _ in range(min(count, free)):
            if self._stopping:
                break
            self._turns += 1
            self._claimers += 1
            self._begin(self._take_turn())
            offered += 1
        return offered

    async def poll(self) -> None:
        """Start turns for the chunks any process could claim now (Pending or abandoned)."""
        if self._turns >= MAX_CHUNK_TURNS:
            return
        live = await self._holders.live_holders()
        waiting = await self._processor.stores.chunks.chunk_work(
            self.names, self._holders.stale_before(), live.ids, live.before
        )
        self.found(waiting)

    def stop(self) -> None:
        """Claim no more; a chunk claimed ahead is handed back without running a row."""
        self._stopping = True
        self._news.set()
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
        return await self._processor.stores.chunks.claim_chunk(
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
        """Run a claimed chunk; True when the next turn was started while its last write was
        being stored. A turn's run (``release`` given: it lets this process claim another
        chunk of the operation in turn) follows the run of the operation's chunk before it
        here, and starts the next turn when its rows are nearly done; a run to equalize
        (``release`` None) follows none and starts none. ``started`` is set once the run
        has its place in the row slots (or ended)."""
        chunks = self._processor.stores.chunks
        record = await self._processor.stores.operations.get(chunk.operation_id)
        if record is None or record.status is not OperationStatus.RUNNING:
            await chunks.end_chunk(chunk.operation_id, chunk.index, self._worker_id, done=False)
            return False
        limit = self._max_resumes
        if chunk.resume_count > limit:
            await end_split(self._processor, record.id, _gave_up_chunk(chunk.index, limit))
            return False
        if chunk.resume_count:
            log.warning(
                "Resuming chunk %d of operation %s: its worker stopped responding",
                chunk.index,
                record.id,
            )
        log.info(
            "Processing chunk %d (rows %d-%d) of operation %s",
            chunk.index,
            chunk.first_row,
            chunk.last_row,
            record.id,
        )
        before = self._after.pop(record.id, None) if release is not None else None
        run = self._processor.start_chunk(record, chunk, before=before)
        key = (record.id, chunk.index)
        task = asyncio.create_task(run.execute())
        self.runs[key] = (run, task)
        offered = False
        try:
            if started is not None:
                joined = _waiter(run.joined)
                await asyncio.wait({task, joined}, return_when=asyncio.FIRST_COMPLETED)
                joined.cancel()
                started.set()
            if release is not None:
                nearly_done = _waiter(run.nearly_done)
                await asyncio.wait({task, nearly_done}, return_when=asyncio.FIRST_COMPLETED)
                nearly_done.cancel()
                if not task.done() and not self._stopping:
                    self._after[record.id] = run
                    release()
                    offered = self.offer(1) > 0
            await task
        finally:
            run.rows_done.set()  # no more rows of this run will run, however it ended
            if self._after.get(record.id) is run:
                del self._after[record.id]  # no chunk of the operation was claimed meanwhile
            self.runs.pop(key, None)
        return offered

    # -- runs to equalize --------------------------------------------------------------------

    async def equalize(self) -> None:
        """Run another chunk at once of an operation whose tenant the process's share finds
        short (``FairShare.short_of_share``), one claim at a time, for as long as the
        process runs; each new run is in the share before the next look."""
        share = self._processor.share
        if share is None:
            return
        share.watch(self._news.set)
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), LOOK_AGAIN)
            self._news.clear()
            if self._stopping:
                return
            try:
                await self._run_one_more(share)
            except StorageError:
                log.warning("Could not claim a chunk to share fairly; will retry", exc_info=True)

    async def _run_one_more(self, share: FairShare) -> None:
        for operations in share.short_of_share():
            candidates = [operation for operation in operations if operation not in self._dry]
            if self._stopping or self._turns >= MAX_CHUNK_TURNS:
                return
            if not candidates:
                continue
            async with self._claiming:
                chunk = await self._claim(among=candidates)
            if chunk is None:
                self._dry.update(candidates)  # none to claim until news of chunks
                continue
            started = asyncio.Event()
            self._turns += 1
            self._begin(self._run_beside(chunk, started))
            await started.wait()
            self._news.set()  # look again at once, this run counted
            return

    async def _run_beside(self, chunk: ChunkRecord, started: asyncio.Event) -> None:
        try:
            await self._process(chunk, None, started)
        except StorageError:
            log.warning("Could not process a chunk; will retry later", exc_info=True)
        finally:
            started.set()
            self._turns -= 1


def _waiter(event: asyncio.Event) -> asyncio.Task[bool]:
    return asyncio.create_task(event.wait())


def _gave_up_chunk(index: int, limit: int) -> str:
    return (
        f"Processing of chunk {index} stopped more than {limit} times before it could finish "
        "(its worker crashed or lost storage each time); the operation is not resumed again"
    )
