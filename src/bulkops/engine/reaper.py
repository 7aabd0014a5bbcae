"""The reaper: what one process does about work whose holder stopped, and stuck work.

One reaper per process (``WorkScheduler`` owns it; its dispatcher takes over what it
queues). At every scan it

- ends split operations whose chunks are all Done (their last worker stopped before it
  could end them);
- asks storage which holders are dead (``Liveness.dead``), confirmed at two looks
  ``CONFIRM_DEATH`` apart with storage answering meanwhile: their work is made abandoned at
  once (heartbeats voided), their chunks offered to the process's claims;
- hands back the chunks this process holds in storage, with a stale heartbeat, that it
  neither admits nor runs (orphans: a claim whose answer was lost, an end never stored);
- queues the operations abandoned at this scan and the one before with the same heartbeat
  (or at once when their holder is dead, or is this process and does not run them) to be
  taken over, except those of holders storage knows alive, until their heartbeat is
  ``ALIVE_PATIENCE`` times ``abandon_after`` old.

``take_over`` takes a queued one over (or fails it once resumed ``max_resumes`` times).
``sweep_stuck`` fails operations Running longer than the stuck-operation timeout. The reaper
also says which heartbeats are abandoned now (``stale_before``) and which holders are alive
(``live_holders``), for the claims of chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.context import EngineContext
from bulkops.engine.heartbeat import LiveHolders
from bulkops.engine.persistence import apply_change
from bulkops.engine.splits import end_split
from bulkops.errors import IllegalTransition, StorageError
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import HELD_STATUSES, OperationChange
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")

# A holder storage finds dead must be found so again this long after (and storage must
# have answered that long since an outage): a process whose liveness lock went with a
# dropped connection takes it again well within it.
CONFIRM_DEATH = 2.0
# A holder storage knows alive (``Liveness.alive``) keeps its work until its heartbeat is
# this many times ``abandon_after`` old: a loaded machine delays a live heartbeat past
# ``abandon_after``, not past this; a hung process (its lock or process id still standing)
# loses its work after it.
ALIVE_PATIENCE = 10

_PICKUP_BATCH = 1000


class Takers(Protocol):
    """What the reaper hands work to: the process's scheduler."""

    def serves(self, record: OperationRecord) -> bool:
        """Whether this process runs operations of that name."""

    def runs(self, operation_id: UUID) -> bool:
        """Whether the operation is run here now (whole)."""

    def enqueue(self, operation_id: UUID) -> None:
        """Queue an operation to be claimed (or taken over) here."""

    def offer_chunks(self, count: int) -> int:
        """News of ``count`` claimable chunks."""

    def chunks_held(self) -> list[tuple[UUID, int]]:
        """The chunks claimed here that are being admitted or run here now."""


class Reaper:
    """Dead holders, abandoned and stuck work of one process (see the module's text)."""

    def __init__(
        self,
        context: EngineContext,
        takers: Takers,
        *,
        abandon_after: float,
        scan_interval: float,
        stuck_timeout: float | None,
        worker_count: int,
        max_resumes: int,
    ) -> None:
        self._context = context
        self._stores = context.stores
        self._outages = context.retry.outages
        self._takers = takers
        self._abandon_after = abandon_after
        self._scan_interval = scan_interval
        self._stuck_timeout = stuck_timeout
        self._worker_count = worker_count
        self._max_resumes = max_resumes
        # Abandoned operations seen once (id -> heartbeat then), and those confirmed.
        self._suspects: dict[UUID, datetime | None] = {}
        self._takeovers: dict[UUID, datetime | None] = {}
        # Holders storage found dead, and when first (monotonic seconds).
        self._dying: dict[str, float] = {}
        self._rechecking: asyncio.Task[None] | None = None
        # Holders storage knew alive at its last answer, and when (monotonic seconds).
        self._alive: frozenset[str] = frozenset()
        self._alive_at = -math.inf

    def to_take_over(self, operation_id: UUID) -> bool:
        """Whether the operation is to be taken over from its holder (``take_over``)."""
        return operation_id in self._takeovers

    async def take_over(
        self, record: OperationRecord, worker_id: str, now: datetime
    ) -> OperationRecord | None:
        """Take the operation over for ``worker_id`` while its heartbeat is the one it was
        seen abandoned with (its holder did not come back, nobody acted first), or fail it
        when it was resumed ``max_resumes`` times; the stored record after, or None."""
        heartbeat = self._takeovers.get(record.id)
        counts = await self._stores.operations.counts(record.id)
        limit = self._max_resumes

        def change(current: OperationRecord) -> OperationChange | None:
            if current.status not in HELD_STATUSES or current.heartbeat_at != heartbeat:
                return None  # its holder came back, or someone else acted first
            if current.resume_count >= limit:
                return lifecycle.fail(current, _gave_up(current, limit), now, counts)
            return lifecycle.take_over(current, worker_id, counts, now)

        try:
            taken = await apply_change(self._stores.operations, record.id, change)
        except IllegalTransition:
            return None
        if taken is not None and taken.worker_id == worker_id:
            log.warning(
                "Resuming operation %s: its worker %s stopped responding",
                record.id,
                record.worker_id,
            )
        return taken

    def forget(self, operation_id: UUID) -> None:
        """The operation's claim or take-over was tried: it is no longer one to take over."""
        self._takeovers.pop(operation_id, None)

    def stale_before(self) -> datetime:
        """Heartbeats older than this are abandoned: ``abandon_after``, plus the time this
        process recently saw storage unreachable (its holders could not renew them)."""
        after = self._abandon_after
        return utcnow() - timedelta(seconds=after + self._outages.excused(after))

    async def live_holders(self, *, afresh: bool = False) -> LiveHolders:
        """The holders storage knows alive (asked again when ``afresh`` or a scan interval
        after its last answer; none when it cannot answer), and how old their heartbeats
        must be for their work to be taken over all the same."""
        after = self._abandon_after
        patience = ALIVE_PATIENCE * after
        before = utcnow() - timedelta(seconds=patience + self._outages.excused(after))
        if afresh or time.monotonic() - self._alive_at >= self._scan_interval:
            try:
                found = await self._stores.liveness.alive()
            except StorageError:
                log.debug("Could not learn which holders are alive", exc_info=True)
                self._alive, self._alive_at = frozenset(), -math.inf
            else:
                self._alive, self._alive_at = frozenset(found), time.monotonic()
        return LiveHolders(self._alive, before)

    async def scan_abandoned(self) -> None:
        """Queue the abandoned operations seen at this scan and the one before (or at once
        when their holder is dead), but not those of holders known alive until their
        heartbeat is older than ``ALIVE_PATIENCE`` allows, and end split operations whose
        last chunk's worker stopped before it could."""
        await self._end_finished_splits()
        dead = await self._find_dead()
        live = await self.live_holders(afresh=True)
        stale_before = self.stale_before()
        await self._hand_back_orphans(stale_before)
        me = self._context.config.worker_id
        seen: dict[UUID, datetime | None] = {}
        takers = self._takers
        for record in await self._stores.operations.abandoned(stale_before, _PICKUP_BATCH):
            if not takers.serves(record) or takers.runs(record.id):
                continue
            beat = record.heartbeat_at
            # This process is alive, but an operation it holds and does not run is an
            # orphan (a claim whose answer was lost with its connection): taken over now.
            mine = record.worker_id == me
            if (
                not mine
                and record.worker_id in live.ids
                and beat is not None
                and beat >= live.before
            ):
                continue  # alive: its heartbeat is late, not stopped
            seen[record.id] = record.heartbeat_at
            if (
                mine
                or record.worker_id in dead
                or (
                    record.id in self._suspects and self._suspects[record.id] == record.heartbeat_at
                )
            ):
                self._takeovers[record.id] = record.heartbeat_at
                takers.enqueue(record.id)
        self._suspects = seen

    async def _hand_back_orphans(self, stale_before: datetime) -> None:
        """Hand back the chunks this process holds in storage but neither admits nor runs
        (a claim whose answer was lost with its connection, an end that storage never
        took): every run here renews its chunks, so a stale one of this holder is one of
        those. Left, they would wait ``ALIVE_PATIENCE`` like a live holder's."""
        me = self._context.config.worker_id
        handed = await self._stores.chunks.hand_back_stale_chunks(
            me, stale_before, keep=self._takers.chunks_held()
        )
        for operation_id, index in handed:
            log.warning(
                "Handed back chunk %d of operation %s: held here, but run by none",
                index,
                operation_id,
            )
        if handed:
            self._takers.offer_chunks(len(handed))

    async def _find_dead(self) -> set[str]:
        """Holders storage found dead at two looks ``CONFIRM_DEATH`` apart, with storage
        answering meanwhile; what they hold is made abandoned at once (its heartbeat
        voided), their chunks for any process to claim. A look that finds new ones
        comes back after ``CONFIRM_DEATH`` instead of at the next scan."""
        liveness = self._stores.liveness
        seen = await liveness.dead()
        now = time.monotonic()
        if self._outages.quiet_for() < 2 * CONFIRM_DEATH:
            self._dying = {}  # after an outage every lock is being taken again
            return set()
        dead = {worker for worker in seen if now - self._dying.get(worker, now) >= CONFIRM_DEATH}
        self._dying = {worker: self._dying.get(worker, now) for worker in seen}
        if dead:
            log.warning("Workers %s are gone: resuming their work now", ", ".join(sorted(dead)))
            await liveness.expire(dead)
            self._takers.offer_chunks(self._worker_count)
        if len(seen) > len(dead) and (self._rechecking is None or self._rechecking.done()):
            self._rechecking = asyncio.create_task(self._recheck())
        return dead

    async def _recheck(self) -> None:
        """Look again at holders found dead once, when they can be confirmed."""
        await asyncio.sleep(CONFIRM_DEATH)
        self._rechecking = None
        await self._outages.quietly(self.scan_abandoned)

    async def stop(self) -> None:
        """Stop looking again at holders found dead once."""
        task = self._rechecking
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _end_finished_splits(self) -> None:
        for operation_id in await self._stores.chunks.finished_splits():
            log.info("Ending split operation %s: all its chunks are done", operation_id)
            await end_split(self._context, operation_id, None)

    async def sweep_stuck(self) -> None:
        """Fail operations that have been Running longer than the stuck timeout."""
        timeout = self._stuck_timeout
        if not timeout:
            return
        now = utcnow()
        message = f"Operation was Running longer than the stuck-operation timeout ({timeout:g} s)"
        operations = self._stores.operations
        for record in await operations.running():
            since = record.started_at or record.created_at
            if (now - since).total_seconds() <= timeout:
                continue
            counts = await operations.counts(record.id)

            def fail(
                current: OperationRecord, counts: lifecycle.RowCounts = counts
            ) -> OperationChange | None:
                if current.status is not OperationStatus.RUNNING:
                    return None
                return lifecycle.fail(current, message, now, counts)

            try:
                failed = await apply_change(operations, record.id, fail)
            except IllegalTransition:
                failed = None
            if failed is not None:
                log.warning("Failed stuck operation %s", record.id)


def _gave_up(record: OperationRecord, limit: int) -> str:
    return (
        f"Processing stopped {record.resume_count + 1} times before it could finish (its "
        f"worker crashed or lost storage each time); it is not resumed again after {limit} "
        "resumptions"
    )
