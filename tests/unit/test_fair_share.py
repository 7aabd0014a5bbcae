"""The policy of ``engine.fair_share``: which waiting row gets the next slot."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from bulkops.engine.fair_share import FairShare, SharedSlots, Turn, TurnSlots, tenant_of
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus

ROW = 0.01  # simulated seconds each row holds its slot


async def simulate(
    share: FairShare, runs: dict[str, tuple[str, int, int]], grants: int
) -> Counter[str]:
    """Run rows of every run (name -> tenant, priority, cap) until ``grants`` slots were
    given out; each row holds its slot for ``ROW`` simulated seconds (charged, no clock)."""
    claimants = {name: share.join(uuid4(), t, p, cap) for name, (t, p, cap) in runs.items()}
    served: Counter[str] = Counter()
    done = asyncio.Event()

    async def worker(name: str) -> None:
        claimant = claimants[name]
        while not done.is_set():
            await share.take(claimant)
            served[name] += 1
            if sum(served.values()) >= grants:
                done.set()
            await asyncio.sleep(0)  # every other run queues meanwhile
            share.give(claimant, ROW)

    tasks = [
        asyncio.create_task(worker(name))
        for name, (_, _, cap) in runs.items()
        for _ in range(cap + 1)  # one more row waiting than the cap allows
    ]
    await done.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return served


async def test_tenants_share_equally_whatever_their_operation_counts() -> None:
    runs = {f"alice{i}": ("alice", 0, 1) for i in range(6)} | {"bob": ("bob", 0, 1)}
    served = await simulate(FairShare(2), runs, 2000)
    alice = sum(count for name, count in served.items() if name.startswith("alice"))
    assert served["bob"] / (alice + served["bob"]) == pytest.approx(0.5, abs=0.05)


async def test_one_tenants_operations_share_its_slots_equally() -> None:
    runs = {f"op{i}": ("alice", 0, 1) for i in range(4)}
    served = await simulate(FairShare(2), runs, 2000)
    assert all(count == pytest.approx(500, rel=0.1) for count in served.values())


async def test_higher_priority_goes_first_and_lower_keeps_at_least_a_tenth() -> None:
    runs = {"high": ("alice", 5, 4), "low": ("bob", 0, 4)}
    served = await simulate(FairShare(4), runs, 4000)
    share_low = served["low"] / 4000
    assert 0.1 <= share_low < 0.2
    assert served["high"] > 4 * served["low"]


async def test_a_run_never_holds_more_than_its_cap() -> None:
    share = FairShare(10)
    capped = share.join(uuid4(), "alice", 0, 2)
    other = share.join(uuid4(), "bob", 0, 10)
    await share.take(capped)
    await share.take(capped)
    third = asyncio.create_task(share.take(capped))
    await asyncio.sleep(0)
    assert not third.done() and capped.held == 2
    for _ in range(8):  # the rest of the slots go to another run meanwhile
        await asyncio.wait_for(share.take(other), 1)
    assert other.held == 8 and not third.done()
    share.give(capped, ROW)
    await asyncio.wait_for(third, 1)
    assert capped.held == 2


async def test_a_newcomer_gets_the_next_free_slot_behind_long_runs() -> None:
    share = FairShare(1)
    old = share.join(uuid4(), "alice", 0, 1)
    for _ in range(100):  # a long history of slot time
        await share.take(old)
        share.give(old, ROW)
    await share.take(old)
    waiting_old = asyncio.create_task(share.take(old))
    new = share.join(uuid4(), "alice", 0, 1)
    waiting_new = asyncio.create_task(share.take(new))
    await asyncio.sleep(0)
    share.give(old, ROW)
    await asyncio.sleep(0)
    # Level with the old run, not owed its 100 rows: the order is the queue's.
    assert waiting_old.done() != waiting_new.done()
    waiting_old.cancel()
    waiting_new.cancel()
    await asyncio.gather(waiting_old, waiting_new, return_exceptions=True)


async def test_leaving_frees_the_slots_and_the_waits_of_a_run() -> None:
    share = FairShare(1)
    first = share.join(uuid4(), "a", 0, 1)
    second = share.join(uuid4(), "b", 0, 1)
    await share.take(first)
    waiting = asyncio.create_task(share.take(second))
    await asyncio.sleep(0)
    share.leave(first)
    await asyncio.wait_for(waiting, 1)
    assert second.held == 1 and share.runnable() == 1
    assert [t.tenant for t in share.tenants()] == ["b"]


async def test_a_turn_passes_the_slot_on_only_when_others_wait() -> None:
    share = FairShare(1)
    mine = share.join(uuid4(), "a", 0, 1)
    turn = Turn(share, mine)
    await turn.hold()
    assert not turn.ran(10, 1.0)  # nobody waits: keep going
    assert turn.rows_per_turn == 1  # slow rows: one a turn
    other = share.join(uuid4(), "b", 0, 1)
    waiting = asyncio.create_task(share.take(other))
    await asyncio.sleep(0.03)
    assert turn.ran(1, 0.03)
    passing = asyncio.create_task(turn.pass_on())
    await asyncio.wait_for(waiting, 1)
    assert not passing.done()  # behind the other run now
    share.give(other, ROW)
    await asyncio.wait_for(passing, 1)
    assert turn.held


async def test_shared_slots_hold_a_slot_of_the_run_and_of_the_share() -> None:
    share = FairShare(3)
    claimant = share.join(uuid4(), "a", 0, 5)
    slots = SharedSlots(2, share, claimant)
    await slots.take()
    await slots.take()
    assert claimant.held == 2
    slots.give()
    assert claimant.held == 1
    assert share.tenants()[0].rows == 1


def record(created_by: str = "ann") -> OperationRecord:
    return OperationRecord(
        id=UUID(int=1),
        operation_name="x",
        status=OperationStatus.PENDING,
        created_by=created_by,
        created_at=datetime.now(UTC),
        source="s",
        file_id="f",
        file_name="f.csv",
        file_size=1,
        file_format="csv",
        metadata={},
    )


def test_tenant_is_the_fairness_key_else_the_creator() -> None:
    class Keyed:
        def fairness_key(self, metadata: object, created_by: str) -> str:
            return f"team-of-{created_by}"

    class Broken:
        def fairness_key(self, metadata: object, created_by: str) -> str:
            raise RuntimeError("no")

    assert tenant_of(record(), object(), None) == "ann"
    assert tenant_of(record(), Keyed(), None) == "team-of-ann"

    class Awaited:
        async def fairness_key(self, metadata: object, created_by: str) -> str:
            return "never"

    assert tenant_of(record(), Broken(), None) == "ann"
    assert tenant_of(record(), Awaited(), None) == "ann"


async def test_a_row_waiting_for_a_rate_limit_gives_its_turn_up() -> None:
    share = FairShare(1)
    turn = Turn(share, share.join(uuid4(), "a", 0, 1))
    await turn.hold()
    other = share.join(uuid4(), "b", 0, 1)
    async with TurnSlots(turn).given_up():
        await asyncio.wait_for(share.take(other), 1)  # the slot is free meanwhile
        share.give(other, ROW)
    assert turn.held


def test_tenant_is_the_operation_tenant_before_its_creator() -> None:
    from dataclasses import replace

    assert tenant_of(replace(record(), tenant="acme"), object(), None) == "acme"


def busy(share: FairShare, tenant: str, priority: int = 0, cap: int = 1) -> UUID:
    """A run that holds its slots (or waits for them): it would run more rows if it could."""
    operation_id = uuid4()
    claimant = share.join(operation_id, tenant, priority, cap)
    claimant.held = cap
    return operation_id


def test_a_tenant_capped_below_its_part_beside_a_fuller_one_is_short() -> None:
    share = FairShare(4)
    for _ in range(6):
        busy(share, "alice")
    bob = busy(share, "bob")

    assert share.short_of_share() == [[bob]]
    busy(share, "bob")  # a second run of bob's: two slots of four reached
    assert share.short_of_share() == []


def test_a_run_alone_or_beside_free_slots_is_never_short() -> None:
    share = FairShare(4)
    busy(share, "alice")
    assert share.short_of_share() == []  # alone: its cap stands
    busy(share, "alice")
    busy(share, "bob")
    assert share.short_of_share() == []  # a slot is free and nobody holds more than its part


def test_a_tenant_held_back_by_its_own_pace_or_claimed_ahead_is_not_short() -> None:
    share = FairShare(4)
    for _ in range(6):
        busy(share, "alice")
    share.join(uuid4(), "bob", 0, 1)  # neither runs a row nor waits for a slot
    assert share.short_of_share() == []

    other = FairShare(4)
    for _ in range(6):
        busy(other, "alice")
    carol = busy(other, "carol")
    other.join(carol, "carol", 0, 1, ahead=True)  # its rows wait for the run before
    assert other.short_of_share() == [[carol]]


def test_a_higher_priority_is_short_beside_lower_ones_until_it_reaches_most() -> None:
    share = FairShare(4)
    for _ in range(6):
        busy(share, "alice", priority=0)
    high = [busy(share, "bob", priority=5)]

    assert share.short_of_share() == [high]
    high += [busy(share, "bob", priority=5), busy(share, "bob", priority=5)]
    assert share.short_of_share() == [sorted(high, key=str)]  # 3 of 4: a tenth is the lower's
    busy(share, "bob", priority=5)
    assert share.short_of_share() == []


def test_the_tenant_furthest_below_its_part_comes_first() -> None:
    share = FairShare(8)
    for _ in range(8):
        busy(share, "alice")
    bob = [busy(share, "bob"), busy(share, "bob")]
    carol = busy(share, "carol")

    assert share.short_of_share() == [[carol], sorted(bob, key=str)]


async def test_the_share_tells_its_watchers_of_joins_starts_and_leaves() -> None:
    share = FairShare(2)
    seen: list[int] = []
    share.watch(lambda: seen.append(1))
    claimant = share.join(uuid4(), "alice", 0, 1)
    await share.take(claimant)
    share.give(claimant, 0.01)
    await share.take(claimant)  # not its first slot: nothing new
    share.leave(claimant)
    assert len(seen) == 3
