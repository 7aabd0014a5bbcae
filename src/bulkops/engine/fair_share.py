"""Which rows run next: the row slots of a process, shared fairly by the runs in it (the
row-slot part of the process's dispatcher, ``engine/dispatcher.py``).

Every run in progress (an operation, or a chunk of one) joins the share as a ``Claimant``
and takes a slot before each row (or, for a run of plain rows one at a time, before each
short turn of rows). When more rows want a slot than there are free, the next slot goes

1. to the highest priority that has a row waiting, except that the lower priorities with
   rows waiting together get at least a tenth of the slot time (``LOWER_SHARE``): a low
   priority is slowed down, never starved;
2. within a priority, to the tenant that has had the least slot time (equal shares);
3. within a tenant, to the operation that has had the least slot time (equal shares).

Slot time is charged when a slot is given (an estimate of the hold, corrected when it is
given back), so the order is that of start-time fair queuing. A claimant never holds more
than its ``cap`` slots (its MaxRowConcurrency), and a newcomer starts level with the others,
not with the credit of all the time it was absent. Rate limits stay with the runs: a row
waiting for a permit gives its slot up (``pacing.Pacer``).

How many slots there are is set where the process is put together (``BULKOPS_WORKER_COUNT``
times MaxRowConcurrency); how many operations are in progress is not limited here: the
dispatcher starts every operation it claims, and a chunk of every split operation, at
once. Which operation or chunk a process claims first is the same order
as here, kept by the stores: highest priority first, then oldest (``claimable``,
``claim_chunk``).

A run's cap can keep its tenant below an equal share while another tenant's runs fill the
rest: one run of MaxRowConcurrency 1 beside six of another tenant gets one slot of four.
``short_of_share`` names the operations of such tenants, so that the process runs another
chunk of one of them at once (``engine/dispatcher.py``); a run alone, or beside runs that
leave slots free, is never given more than its cap that way.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from time import perf_counter
from uuid import UUID

from bulkops.engine.slots import Slots
from bulkops.storage.records import OperationRecord

log = logging.getLogger("bulkops.engine")

LOWER_SHARE = 0.1  # the least share of slot time of lower priorities that have work
QUANTUM = 0.02  # seconds a run of rows one at a time keeps its slot while others wait
_FIRST_ESTIMATE = 0.001  # seconds a row is expected to hold its slot before any is timed
_MAX_CREDIT = 1.0  # seconds of slot time a lower priority may be owed at most


@dataclass(eq=False, slots=True)
class Claimant:
    """One run's place in the share."""

    operation_id: UUID
    tenant: str
    priority: int
    cap: int  # the most slots it may hold at once
    ahead: bool = False  # set up ahead of its rows (they wait for another run): not counted yet
    started: bool = False  # it has taken a slot
    held: int = 0
    served: float = 0.0  # slot seconds charged (its virtual time among its tenant's)
    estimate: float = _FIRST_ESTIMATE  # seconds a slot is held, on average
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)

    @property
    def wants(self) -> bool:
        """A row of it waits and it may hold one more slot."""
        return bool(self.waiters) and self.held < self.cap

    @property
    def busy(self) -> bool:
        """It holds a slot or has a row waiting for one: it runs rows as fast as it may."""
        return self.held > 0 or bool(self.waiters)


@dataclass(frozen=True, slots=True)
class TenantShare:
    """What the share knows of one tenant right now (for ``/metrics`` and the dashboard)."""

    tenant: str
    operations: int  # runs in progress
    running: int  # slots held
    waiting: int  # rows waiting for a slot
    rows: int  # rows run since the process started


class FairShare:
    """``capacity`` row slots handed out by priority, then tenant, then operation."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._free = capacity
        self._claimants: set[Claimant] = set()
        self._waiting = 0  # rows waiting for a slot, over every claimant
        self._tenant_served: dict[tuple[int, str], float] = {}
        self._owed: dict[int, float] = {}  # slot seconds each lower priority is owed
        self._rows: Counter[str] = Counter()
        self._watchers: list[Callable[[], None]] = []

    @property
    def held(self) -> int:
        """Slots held right now: the rows (or turns of rows) running in the process."""
        return self.capacity - self._free

    def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed`` whenever a run joins, starts its rows or leaves."""
        self._watchers.append(changed)

    def _changed(self) -> None:
        for changed in self._watchers:
            changed()

    # -- joining and leaving -------------------------------------------------------------

    def join(
        self, operation_id: UUID, tenant: str, priority: int, cap: int, *, ahead: bool = False
    ) -> Claimant:
        """Enter the share; a newcomer (and a tenant new at its priority) starts level
        with those already in it. A run set up ahead of its rows (``ahead``) counts in
        ``short_of_share`` only once it takes its first slot."""
        peers = [c for c in self._claimants if c.priority == priority]
        key = (priority, tenant)
        if key not in self._tenant_served or not any(c.tenant == tenant for c in peers):
            others = [self._tenant_served[(priority, c.tenant)] for c in peers]
            floor = min(others, default=0.0)
            self._tenant_served[key] = max(self._tenant_served.get(key, 0.0), floor)
        mine = [c.served for c in peers if c.tenant == tenant]
        claimant = Claimant(operation_id, tenant, priority, max(1, cap), ahead)
        claimant.served = min(mine, default=0.0)
        self._claimants.add(claimant)
        self._changed()
        return claimant

    def leave(self, claimant: Claimant) -> None:
        """Leave the share (the run ended); slots it still holds are freed."""
        self._claimants.discard(claimant)
        for waiter in claimant.waiters:
            waiter.cancel()
        self._waiting -= len(claimant.waiters)
        claimant.waiters.clear()
        self._free += claimant.held
        claimant.held = 0
        if not any(
            c.tenant == claimant.tenant and c.priority == claimant.priority for c in self._claimants
        ):
            self._tenant_served.pop((claimant.priority, claimant.tenant), None)
        if not any(c.priority == claimant.priority for c in self._claimants):
            self._owed.pop(claimant.priority, None)
        self._dispatch()
        self._changed()

    # -- slots -----------------------------------------------------------------------------

    @property
    def contended(self) -> bool:
        """Rows are waiting for a slot."""
        return self._waiting > 0

    async def take(self, claimant: Claimant) -> None:
        """Wait for a slot for one row of ``claimant`` and hold it."""
        if self._free > 0 and not self._waiting and claimant.held < claimant.cap:
            self._grant(claimant)
            return
        waiter = self._queue(claimant)
        self._dispatch()
        await self._wait(claimant, waiter)

    async def pass_on(self, claimant: Claimant, seconds: float, rows: int) -> None:
        """Give back a slot held for ``seconds`` and wait for one again, in one step: the
        slot goes to whoever is next, which may be ``claimant`` itself."""
        waiter = self._queue(claimant)
        self.give(claimant, seconds, rows)
        await self._wait(claimant, waiter)

    def _queue(self, claimant: Claimant) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        claimant.waiters.append(waiter)
        self._waiting += 1
        return waiter

    async def _wait(self, claimant: Claimant, waiter: asyncio.Future[None]) -> None:
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter in claimant.waiters:
                claimant.waiters.remove(waiter)
                self._waiting -= 1
            elif waiter.done() and not waiter.cancelled():
                self.give(claimant, 0.0)  # granted as the wait was cancelled
            raise

    def give(self, claimant: Claimant, seconds: float, rows: int = 1) -> None:
        """Give back a slot held for ``seconds`` while ``rows`` rows ran."""
        if claimant.held <= 0:
            return
        claimant.held -= 1
        self._free += 1
        self._charge(claimant, seconds - claimant.estimate)
        claimant.estimate += (seconds - claimant.estimate) * 0.2
        self._rows[claimant.tenant] += rows
        if self._waiting:
            self._dispatch()

    def _grant(self, claimant: Claimant) -> None:
        claimant.held += 1
        self._free -= 1
        self._charge(claimant, claimant.estimate)
        if not claimant.started:
            claimant.started = True
            claimant.ahead = False
            self._changed()

    def _dispatch(self) -> None:
        while self._free > 0 and self._waiting:
            claimant = pick(self._claimants, self._tenant_served, self._owed)
            if claimant is None:
                return
            waiter = claimant.waiters.popleft()
            self._waiting -= 1
            self._grant(claimant)
            waiter.set_result(None)

    def _charge(self, claimant: Claimant, seconds: float) -> None:
        claimant.served += seconds
        key = (claimant.priority, claimant.tenant)
        self._tenant_served[key] = self._tenant_served.get(key, 0.0) + seconds
        if len(self._owed) or self._waiting:
            self._owe_lower(claimant, seconds)

    def _owe_lower(self, claimant: Claimant, seconds: float) -> None:
        """Lower priorities with rows waiting are owed their share of the slot time given."""
        levels = {c.priority for c in self._claimants if c.wants}
        levels.add(claimant.priority)
        if len(levels) < 2:
            self._owed.clear()
            return
        top = max(levels)
        lower = [level for level in levels if level != top]
        for level in lower:
            owed = self._owed.get(level, 0.0) + LOWER_SHARE * seconds / len(lower)
            self._owed[level] = min(owed, _MAX_CREDIT)
        if claimant.priority != top:
            self._owed[claimant.priority] = self._owed.get(claimant.priority, 0.0) - seconds

    # -- what it shows ---------------------------------------------------------------------

    def tenants(self) -> list[TenantShare]:
        """Each tenant's runs, slots and waiting rows now, and its rows so far."""
        names = sorted({c.tenant for c in self._claimants} | set(self._rows))
        return [
            TenantShare(
                tenant=name,
                operations=sum(1 for c in self._claimants if c.tenant == name),
                running=sum(c.held for c in self._claimants if c.tenant == name),
                waiting=sum(len(c.waiters) for c in self._claimants if c.tenant == name),
                rows=self._rows[name],
            )
            for name in names
        ]

    def runnable(self) -> int:
        """Operations with a run in progress here."""
        return len({c.operation_id for c in self._claimants})

    # -- how many runs -----------------------------------------------------------------------

    def short_of_share(self) -> list[list[UUID]]:
        """Per tenant (at a priority) that deserves one more run at once here, the
        operations of its that have a run here: what ``engine/dispatcher.py`` claims
        another chunk of. Tenants furthest below their part come first.

        A tenant's reach is its runs' caps together. The capacity is parted by priority,
        from the highest down (``LOWER_SHARE`` of it kept for the lower ones that have
        runs), and within a priority equally across tenants; a tenant that cannot use
        more (one of its runs neither runs a row nor waits for a slot: a rate limit or its
        own pace holds it back) keeps what it reaches. A tenant deserves one more run when
        its reach is below its part while another reaches past its own. Never while slots
        stay free with every run at its cap: then nobody is held back by another, and a
        run alone keeps its cap. Runs set up ahead of their rows count once they start."""
        counted = [c for c in self._claimants if not c.ahead]
        if sum(c.cap for c in counted) < self.capacity:
            return []
        reach: dict[tuple[int, str], int] = {}
        grows: dict[tuple[int, str], bool] = {}
        operations: dict[tuple[int, str], list[UUID]] = {}
        for c in sorted(counted, key=lambda c: str(c.operation_id)):
            key = (c.priority, c.tenant)
            reach[key] = reach.get(key, 0) + c.cap
            grows[key] = grows.get(key, True) and c.busy
            found = operations.setdefault(key, [])
            if c.operation_id not in found:
                found.append(c.operation_id)
        short: list[tuple[float, list[UUID]]] = []
        over = False
        left = float(self.capacity)
        levels = sorted({priority for priority, _ in reach}, reverse=True)
        for number, level in enumerate(levels):
            lower = sum(r for (p, _), r in reach.items() if p in levels[number + 1 :])
            budget = max(0.0, left - min(lower, LOWER_SHARE * self.capacity))
            tenants = [key for key in reach if key[0] == level]
            fixed = [reach[key] for key in tenants if not grows[key]]
            part = _level_part(budget, fixed, len(tenants) - len(fixed))
            for key in tenants:
                allotted = min(reach[key], part)
                if reach[key] > allotted:
                    over = True
                elif grows[key] and reach[key] < part:
                    short.append((reach[key] / part, operations[key]))
                left -= allotted
        if not over:
            return []
        short.sort(key=lambda found: found[0])
        return [found for _, found in short]


def _level_part(budget: float, fixed: list[int], growing: int) -> float:
    """Each tenant's part of ``budget`` (water filling): a tenant of ``fixed`` reach below an
    equal part keeps it, the rest is parted equally by the others, ``growing`` of which
    could use any amount."""
    left, count = budget, len(fixed) + growing
    for reach in sorted(fixed):
        if reach * count >= left:
            break
        left -= reach
        count -= 1
    return left / count if count else left


def pick(
    claimants: Iterable[Claimant],
    tenant_served: dict[tuple[int, str], float],
    owed: dict[int, float],
) -> Claimant | None:
    """The claimant whose waiting row gets the next slot (None: no row can take one).

    The policy in one function: the highest priority that wants a slot, unless a lower one
    is owed slot time (the most owed first); then the tenant, then the operation, that has
    been served least.
    """
    wanting = [c for c in claimants if c.wants]
    if not wanting:
        return None
    levels = {c.priority for c in wanting}
    top = max(levels)
    level = top
    owing = [(owed.get(p, 0.0), p) for p in levels if p != top and owed.get(p, 0.0) > 0]
    if owing:
        level = max(owing)[1]
    at_level = [c for c in wanting if c.priority == level]
    tenant = min(
        {c.tenant for c in at_level}, key=lambda name: (tenant_served.get((level, name), 0.0), name)
    )
    return min(
        (c for c in at_level if c.tenant == tenant),
        key=lambda c: (c.served, str(c.operation_id)),
    )


class Turn:
    """The slot of a run whose rows go one at a time: the run keeps it across rows while
    nobody else waits, and passes it on after ``QUANTUM`` seconds when others do."""

    def __init__(self, share: FairShare, claimant: Claimant) -> None:
        self._share = share
        self._claimant = claimant
        self._since = 0.0
        self._rows = 0
        self.held = False
        self.per_row = _FIRST_ESTIMATE  # seconds a row took lately

    async def hold(self) -> None:
        """Hold the slot (waiting for it when it was given up)."""
        if not self.held:
            await self._share.take(self._claimant)
            self.held = True
            self._since = perf_counter()
            self._rows = 0

    @property
    def rows_per_turn(self) -> int:
        """How many rows fit in one turn at the pace of the last ones (at least one)."""
        return max(1, int(QUANTUM / self.per_row)) if self.per_row > 0 else 1_000_000

    def ran(self, rows: int, seconds: float) -> bool:
        """Count ``rows`` rows that took ``seconds``; True when the turn should pass on.

        Time nobody else waited for is not charged: the turn starts again whenever the
        share is found uncontended."""
        if rows:
            self.per_row += (seconds / rows - self.per_row) * 0.5
        self._rows += rows
        now = perf_counter()
        if not self._share.contended:
            self._since = now
            return False
        return now - self._since >= QUANTUM

    async def pass_on(self) -> None:
        """Let the share give the slot to whoever is next (perhaps this run again)."""
        if not self.held:
            await self.hold()
            return
        self.held = False
        await self._share.pass_on(self._claimant, perf_counter() - self._since, self._rows)
        self.held = True
        self._since = perf_counter()
        self._rows = 0

    def release(self) -> None:
        """Give the slot up (before a wait that runs no row)."""
        if self.held:
            self.held = False
            self._share.give(self._claimant, perf_counter() - self._since, self._rows)


class SharedSlots(Slots):
    """A run's MaxRowConcurrency slots, each also a slot of the process's share."""

    def __init__(self, count: int, share: FairShare, claimant: Claimant) -> None:
        super().__init__(count)
        self._share = share
        self._claimant = claimant
        # Start times, oldest first: rows end out of order, yet the sum of the held times
        # (what the share charges) is the same whichever start a slot is matched with.
        self._starts: deque[float] = deque()

    async def take(self) -> None:
        """Wait for a free slot of the run, then of the share, and hold both."""
        await super().take()
        try:
            await self._share.take(self._claimant)
        except BaseException:
            super().give()
            raise
        self._starts.append(perf_counter())

    def give(self) -> None:
        """Free a held slot (the share's first)."""
        started = self._starts.popleft() if self._starts else perf_counter()
        self._share.give(self._claimant, perf_counter() - started)
        super().give()


class TurnSlots(Slots):
    """The one slot of a run whose rows go one at a time, as ``Slots``: a row waiting for a
    rate-limit permit gives the run's turn up meanwhile (``Pacer``)."""

    def __init__(self, turn: Turn) -> None:
        super().__init__(1)
        self._turn = turn

    async def take(self) -> None:
        """Hold the turn again."""
        await self._turn.hold()

    def give(self) -> None:
        """Give the turn up."""
        self._turn.release()


def tenant_of(record: OperationRecord, instance: object, metadata: object) -> str:
    """Whom an operation's rows count against: the operation class's
    ``fairness_key(metadata, created_by)`` when it defines one, else the operation's
    tenant when it has one, else its creator."""
    key = getattr(instance, "fairness_key", None)
    if callable(key):
        try:
            found = key(metadata, record.created_by)
        except Exception:  # a broken key must not stop the operation
            log.warning("fairness_key of %s failed; using its creator", record.id, exc_info=True)
        else:
            if inspect.isawaitable(found):  # it must answer at once, not be awaited
                getattr(found, "close", lambda: None)()
                log.warning("fairness_key of %s must be a plain def; using its creator", record.id)
            elif found is not None:
                return str(found)
    return record.tenant or record.created_by
