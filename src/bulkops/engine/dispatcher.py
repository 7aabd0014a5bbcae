"""The dispatcher: in one process, the one place that decides what runs next.

A process runs operations, chunks of split operations and rows, and its ``Dispatcher``
decides all three, in one order: highest priority first, then equal shares across tenants,
then across a tenant's operations.

- **Operations.** Every operation the process can claim is taken on at once (``enqueue``:
  found by a pick-up, a poll or a notice, created or retried here, or to take over from a
  dead holder), up to ``MAX_OPERATIONS`` at once; the rest wait in its queue, in order.
  Taking one on claims it (or takes it over, through the reaper) and runs it
  (``whole.WholeOperation``: its first rows, then the rest or a split into chunks).
  Claims are made one at a time, each after ``CLAIM_DEFER`` seconds per run the process
  holds (at most ``MAX_CLAIM_DEFER``): when every process hears of new operations at
  once, the least busy claims first, and the operations spread over the processes
  rather than going to whichever wins the database's lock.
- **Chunks, in turn.** A turn claims one chunk and runs it (``chunk_runs.ChunkRuns``). A
  process runs one chunk of an operation in turn at a time, so within a process the
  operation's parallelism stays its MaxRowConcurrency; its other chunks are left to other
  processes, or to this one, chunk after chunk. One turn at a time looks for a chunk
  (``MAX_LOOKS``): news of chunks starts one, which starts the next as soon as it claimed
  one, until a claim finds none; more would only queue for the claim. Once the second half
  of a chunk's rows is being read the next turn starts (claim-ahead), so the row loop does
  not sit idle while a claim waits behind the writes in flight.
- **Chunks, beside.** When the row slots are contended and a tenant is short of its fair part
  because its runs are at their caps (``FairShare.short_of_share``), another chunk of one of
  its operations is claimed and run at once, beside the one running already. One such claim
  at a time, each counted in the share before the next is decided. An operation alone, or
  beside runs that leave slots free, is never run more than one chunk at a time this way.
  The dispatcher's one loop (``run``) makes these decisions, whenever the share changed or
  chunks may be claimable, and at least every ``LOOK_AGAIN`` seconds.
- **Row slots.** Which run's row takes the next free slot is its ``FairShare``
  (``engine/fair_share.py``): the rows take and give back their slots themselves, without a
  hop through a task, and the share hands a freed slot on in the order above.

Operations and chunks are claimed from storage in the same order (``claimable``,
``claim_chunk``). Everything it starts runs as a task it tracks (``begin``), so it knows when
the process is idle (``wait_idle``); ``stop`` lets its runs finish, for a while, then stops
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.chunks import ChunkRange
from bulkops.engine.context import EngineContext
from bulkops.engine.persistence import apply_change
from bulkops.engine.polling import processing
from bulkops.engine.ports import InTurn
from bulkops.engine.run import Run
from bulkops.engine.scope import StopReason
from bulkops.engine.whole import WholeOperation
from bulkops.errors import IllegalTransition, StorageError
from bulkops.storage import lifecycle
from bulkops.storage.records import ChunkRecord, OperationRecord

if TYPE_CHECKING:
    from bulkops.engine.fair_share import FairShare
    from bulkops.engine.reaper import Reaper

log = logging.getLogger("bulkops.engine")

# Operations a process works on at once at most: a bound against a runaway (open files,
# heartbeats, connections), far above what its row slots can keep busy; the rest wait in
# the queue in order.
MAX_OPERATIONS = 256
# Seconds a claim of an operation waits per run the process holds, and at most: see the
# module's text. An idle process claims at once.
CLAIM_DEFER = 0.002
MAX_CLAIM_DEFER = 0.05
# Chunks a process works on at once at most (one per split operation, one claimed ahead
# each, and those run beside): a bound against a runaway, far above what a process's row
# slots can use.
MAX_CHUNK_TURNS = 256
# Turns looking for a chunk at once at most: claims are taken one at a time anyway.
MAX_LOOKS = 1
# Seconds between looks at the share when nothing changed in it: a run's pace (rows
# waiting for a rate limit, say) changes without telling it.
LOOK_AGAIN = 0.5


class ChunkWork(Protocol):
    """How the dispatcher's chunks are claimed and run (``chunk_runs.ChunkRuns``)."""

    runs: dict[tuple[UUID, int], tuple[Run[ChunkRange], asyncio.Task[None]]]

    @property
    def held(self) -> list[tuple[UUID, int]]:
        """The chunks claimed here that are being admitted or run here now."""
        ...

    async def waiting(self, exclude: set[UUID] | None = None) -> int:
        """How many chunks could be claimed now, not counting those of ``exclude``."""
        ...

    async def claim(
        self, exclude: set[UUID] | None = None, among: list[UUID] | None = None
    ) -> ChunkRecord | None:
        """Claim a chunk, not of ``exclude``, or only of ``among``."""
        ...

    def hold(self, chunk: ChunkRecord) -> None:
        """Count a claimed chunk held here until ``let_go``."""

    def let_go(self, chunk: ChunkRecord) -> None:
        """A chunk counted by ``hold`` is no longer held here."""

    def stop(self) -> None:
        """Run no further chunk."""

    async def run(
        self, chunk: ChunkRecord, turn: InTurn | None, started: asyncio.Event | None = None
    ) -> bool:
        """Run a claimed chunk, in ``turn`` or beside; True when the next turn began
        before it ended."""
        ...


class Dispatcher:
    """What one process runs next: its operations, its chunks and its row slots (see the
    module's text). ``reaper`` takes abandoned operations over and says whose chunks may
    be taken; ``chunks`` claims and runs the chunks it decides on."""

    def __init__(self, context: EngineContext, reaper: Reaper, chunks: ChunkWork) -> None:
        self._context = context
        self._reaper = reaper
        self._share: FairShare | None = context.share
        self._work: set[asyncio.Task[None]] = set()  # everything started, until it ends
        self._idle = asyncio.Event()
        self._idle.set()
        # Operations: queued or run here, those waiting beyond the bound, and the runs.
        self._known: set[UUID] = set()
        self._later: deque[UUID] = deque()
        self._operations_here = 0
        self._active: dict[UUID, tuple[Run[WholeOperation], asyncio.Task[None]]] = {}
        self._claiming = asyncio.Lock()  # operations are claimed one at a time
        # Chunks: how they are claimed and run; turns started and not ended, turns looking.
        self.chunks = chunks
        self._turns = 0
        self._looking = 0
        self._again = False  # news came while a turn looked: it may have looked too early
        self._no_chunk = False  # the last claim found none: no turn tries until news
        # Operations run here in turn (not counting one whose rows are nearly done).
        self._in_turn: set[UUID] = set()
        # Operations a claim to run beside found no chunk of, until news of chunks.
        self._dry: set[UUID] = set()
        self._news = asyncio.Event()  # the share changed, or chunks may be claimable
        self._stopping = False

    # -- tasks -----------------------------------------------------------------------------

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

    async def wait_idle(self) -> None:
        """Return once nothing is queued or running."""
        await self._idle.wait()

    # -- operations ------------------------------------------------------------------------

    def enqueue(self, operation_id: UUID) -> None:
        """Take an operation on unless it is queued or run here already."""
        if self._stopping or operation_id in self._known:
            return
        self._known.add(operation_id)
        if self._operations_here >= MAX_OPERATIONS:
            self._later.append(operation_id)  # started as one here ends
            return
        self._operations_here += 1
        self.begin(self._take_operation(operation_id))

    def runs(self, operation_id: UUID) -> bool:
        """Whether the operation is run here now, whole."""
        return operation_id in self._active

    @property
    def active(self) -> list[UUID]:
        """Operations being processed right now (whole, or chunks of them)."""
        found = [*self._active, *(operation for operation, _ in self.chunks.runs)]
        return list(dict.fromkeys(found))

    async def _take_operation(self, operation_id: UUID) -> None:
        try:
            if not self._stopping:
                await self._claim_and_run(operation_id)
        except StorageError:
            log.warning("Could not process %s; will retry later", operation_id, exc_info=True)
        finally:
            self._known.discard(operation_id)
            self._reaper.forget(operation_id)
            self._active.pop(operation_id, None)
            self._operations_here -= 1
            if self._later and not self._stopping:
                self._operations_here += 1
                self.begin(self._take_operation(self._later.popleft()))

    async def _claim_and_run(self, operation_id: UUID) -> None:
        async with self._claiming:
            await _defer(len(self._active) + len(self.chunks.runs))
            if self._stopping:
                return
            claimed = await _claim(self._context, self._reaper, operation_id)
            if claimed is None:
                return
            run = Run(self._context, claimed, WholeOperation())
            task = asyncio.create_task(run.execute())
            self._active[operation_id] = (run, task)
        await task
        if run.scope.chunks:
            self.chunks_found(run.scope.chunks)

    # -- chunks in turn --------------------------------------------------------------------

    def chunks_found(self, count: int) -> int:
        """News of ``count`` claimable chunks (a split, a poll, a notice, workers gone):
        start turns for them, and let runs beside try again; how many turns."""
        self._dry.clear()
        self._news.set()
        return self._offer(count)

    async def poll_chunks(self) -> int:
        """Start turns for the chunks this process could claim in turn now, and say how
        many: a poll while it runs the only split operation there is starts no claim that
        cannot succeed. Runs beside that found no chunk hear of their operations' too."""
        if self._turns >= MAX_CHUNK_TURNS:
            return 0
        waiting = await self.chunks.waiting(exclude=set(self._in_turn))
        if waiting:
            return self.chunks_found(waiting)
        if self._dry and await self.chunks.waiting():
            self._dry.clear()
            self._news.set()
        return 0

    def _offer(self, count: int) -> int:
        """Start turns to claim up to ``count`` chunks; how many. The turns are bounded by
        the operations, not by ``worker_count``: every split operation progresses."""
        self._no_chunk = False
        free = min(MAX_CHUNK_TURNS - self._turns, MAX_LOOKS - self._looking)
        if count > free:
            self._again = True
        offered = 0 if self._stopping else max(0, min(count, free))
        for _ in range(offered):
            self._turns += 1
            self._looking += 1
            self.begin(self._take_turn())
        return offered

    async def _take_turn(self) -> None:
        claimed = next_began = False
        try:
            if not self._stopping and not self._no_chunk:
                claimed, next_began = await self._claim_in_turn()
            else:
                self._looking -= 1
        except StorageError:
            log.warning("Could not claim or process a chunk; will retry later", exc_info=True)
        finally:
            self._turns -= 1
        if claimed and not next_began:
            self._offer(1)  # there may be more: keep this turn draining them

    async def _claim_in_turn(self) -> tuple[bool, bool]:
        """Claim one chunk of an operation not run here in turn, and run it: whether one
        was claimed, and whether the next turn began before this one ended."""
        try:
            self._again = False
            chunk = await self.chunks.claim(exclude=self._in_turn)
            if chunk is not None:
                self._in_turn.add(chunk.operation_id)
        finally:
            self._looking -= 1
        if chunk is None:
            if self._again:  # news while it looked: another turn looks afresh
                self._offer(1)
            else:
                self._no_chunk = True  # until a split, a notice or a poll says otherwise
            return False, False
        self._offer(1)  # a chunk of another operation may be there to claim too
        turn = _Turn(self, chunk.operation_id)
        try:
            return True, await self.chunks.run(chunk, turn)
        finally:
            turn.release()

    # -- chunks beside ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run another chunk at once of an operation whose tenant the share finds short,
        one claim at a time, until ``stop``; each new run is in the share before the next
        look. Without a share there is nothing to even out."""
        share = self._share
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
                await self._run_one_beside(share)
            except StorageError:
                log.warning("Could not claim a chunk to share fairly; will retry", exc_info=True)

    async def _run_one_beside(self, share: FairShare) -> None:
        for operations in share.short_of_share():
            candidates = [operation for operation in operations if operation not in self._dry]
            if self._stopping or self._turns >= MAX_CHUNK_TURNS:
                return
            if not candidates:
                continue
            chunk = await self.chunks.claim(among=candidates)
            if chunk is None:
                self._dry.update(candidates)  # none to claim until news of chunks
                continue
            started = asyncio.Event()
            self._turns += 1
            self.chunks.hold(chunk)  # held here before its task starts
            self.begin(self._run_beside(chunk, started))
            await started.wait()
            self._news.set()  # look again at once, this run counted
            return

    async def _run_beside(self, chunk: ChunkRecord, started: asyncio.Event) -> None:
        try:
            await self.chunks.run(chunk, None, started)
        except StorageError:
            log.warning("Could not process a chunk; will retry later", exc_info=True)
        finally:
            started.set()
            self._turns -= 1
            self.chunks.let_go(chunk)

    # -- stopping --------------------------------------------------------------------------

    async def stop(self, timeout: float) -> None:
        """Take nothing more on, let the runs finish for up to ``timeout`` seconds, then stop
        the rest (their finished rows are kept, and their work is handed back)."""
        self._stopping = True
        self._news.set()
        self.chunks.stop()  # a chunk claimed ahead is handed back
        running = [task for _, task in self._runs()]
        if running and timeout > 0:
            await asyncio.wait(running, timeout=timeout)
        for run, task in self._runs():
            if not task.done():
                run.stop(StopReason.SHUTDOWN)
        remaining = [task for _, task in self._runs()]
        if remaining:
            await asyncio.gather(*remaining, return_exceptions=True)
        # Claims and turns that were starting as the stop came.
        await asyncio.gather(*self._work, return_exceptions=True)

    def _runs(self) -> list[tuple[Run[Any], asyncio.Task[None]]]:
        return [*self._active.values(), *self.chunks.runs.values()]


class _Turn:
    """One turn's chunk run: its operation may be claimed in turn again once its rows are
    nearly done, or once it ended, whichever comes first."""

    def __init__(self, dispatcher: Dispatcher, operation_id: UUID) -> None:
        self._dispatcher = dispatcher
        self._operation_id = operation_id
        self._released = False

    def release(self) -> None:
        """Another chunk of the operation may be claimed in turn (once per turn)."""
        if not self._released:
            self._released = True
            self._dispatcher._in_turn.discard(self._operation_id)

    def nearly_done(self) -> bool:
        """Let the next chunk be claimed ahead: True when a turn to claim it began."""
        self.release()
        return self._dispatcher._offer(1) > 0


async def _defer(held: int) -> None:
    """Wait before a claim of an operation: ``CLAIM_DEFER`` seconds per run ``held`` here,
    at most ``MAX_CLAIM_DEFER`` (none when idle)."""
    if held:
        await asyncio.sleep(min(MAX_CLAIM_DEFER, CLAIM_DEFER * held))


async def _claim(
    context: EngineContext, reaper: Reaper, operation_id: UUID
) -> OperationRecord | None:
    """Claim an operation this process serves for it, or take it over when the reaper
    queued it to be: the record claimed, or None when another process has it."""
    record = await context.stores.operations.get(operation_id)
    if record is None or record.operation_name not in context.registry:
        return None
    now, me = utcnow(), context.config.worker_id
    if reaper.to_take_over(operation_id):
        claimed = await reaper.take_over(record, me, now)
    else:
        try:
            claimed = await apply_change(
                context.stores.operations,
                operation_id,
                lambda current: (
                    lifecycle.claim(current, me, now) if current.worker_id is None else None
                ),
            )
        except IllegalTransition:
            claimed = None
    if claimed is None or claimed.worker_id != me:
        log.info("Operation %s was taken by another worker; skipping", operation_id)
        return None
    return claimed
