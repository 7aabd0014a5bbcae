"""ActionStore on every adapter: an action stored with its items, claimed by one runner
at a time, taken over when its runner goes quiet, each item's outcome recorded once and
only by the runner holding it, ended once; listed newest first within a tenant."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from bulkops.storage.actions import ActionItem, ActionKind, ActionRecord, ActionStatus, Outcome
from bulkops.storage.memory_actions import MemoryActionStore
from bulkops.storage.ports import ActionStore
from bulkops.storage.sql.actions import SqlActionStore
from tests.contract.conftest import BASE_TIME, Stores

LATER = BASE_TIME + timedelta(minutes=1)


@pytest.fixture
def actions(stores: Stores) -> ActionStore:
    if stores.database is None:
        return MemoryActionStore()
    return SqlActionStore(stores.database)


def make_action(seconds: int = 0, **overrides: object) -> ActionRecord:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "action": ActionKind.RETRY,
        "filter": {"status": ["CompletedWithErrors"], "createdBy": "ada"},
        "status": ActionStatus.RUNNING,
        "matched": 3,
        "created_by": "ada",
        "created_at": BASE_TIME + timedelta(seconds=seconds),
    }
    values.update(overrides)
    return ActionRecord(**values)  # type: ignore[arg-type]


async def test_an_action_is_stored_with_its_items_in_order(actions: ActionStore) -> None:
    record = make_action(from_step="Send", include_completed=True, reason="API down")
    operations = [uuid.uuid4() for _ in range(3)]
    await actions.add_action(record, operations)
    assert await actions.get_action(record.id) == record
    assert await actions.get_action(uuid.uuid4()) is None
    pending = await actions.action_items(record.id, (Outcome.PENDING,), 10)
    assert pending == [ActionItem(record.id, i, op) for i, op in enumerate(operations)]
    assert len(await actions.action_items(record.id, (Outcome.PENDING,), 2)) == 2
    assert await actions.action_items(record.id, (Outcome.SKIPPED,), 10) == []


async def test_one_runner_holds_an_action_until_it_goes_quiet(actions: ActionStore) -> None:
    first, second = make_action(0), make_action(5)
    await actions.add_action(second, [uuid.uuid4()])
    await actions.add_action(first, [uuid.uuid4()])
    ended = make_action(10, status=ActionStatus.COMPLETED, completed_at=BASE_TIME)
    await actions.add_action(ended, [])
    stale = BASE_TIME - timedelta(minutes=5)
    claimed = await actions.claim_action("r1", BASE_TIME, stale)
    assert claimed is not None and claimed.id == first.id and claimed.runner == "r1"
    other = await actions.claim_action("r2", BASE_TIME, stale)
    assert other is not None and other.id == second.id
    assert await actions.claim_action("r3", BASE_TIME, stale) is None
    again = await actions.claim_action("r1", BASE_TIME, stale)  # its own, after a failure
    assert again is not None and again.id == first.id
    assert await actions.heartbeat_action(first.id, "r1", LATER)
    assert not await actions.heartbeat_action(first.id, "r3", LATER)
    # r1 goes quiet: r3 takes its action over, and r1 can no longer record anything.
    taken = await actions.claim_action("r3", LATER + timedelta(minutes=10), LATER + timedelta(1))
    assert taken is not None and taken.runner == "r3"
    assert not await actions.record_item(first.id, 0, Outcome.DONE, None, "r1", LATER)
    assert await actions.record_item(first.id, 0, Outcome.DONE, None, "r3", LATER)


async def test_concurrent_claims_take_an_action_once(actions: ActionStore) -> None:
    record = make_action()
    await actions.add_action(record, [uuid.uuid4()])
    stale = BASE_TIME - timedelta(minutes=5)
    claims = await asyncio.gather(
        *(actions.claim_action(f"r{i}", BASE_TIME, stale) for i in range(6))
    )
    assert len([c for c in claims if c is not None]) == 1


async def test_outcomes_are_counted_once_and_the_action_ends_once(actions: ActionStore) -> None:
    record = make_action()
    operations = [uuid.uuid4() for _ in range(3)]
    await actions.add_action(record, operations)
    assert await actions.claim_action("r1", BASE_TIME, BASE_TIME) is not None
    assert await actions.record_item(record.id, 0, Outcome.DONE, None, "r1", LATER)
    assert not await actions.record_item(record.id, 0, Outcome.FAILED, "again", "r1", LATER)
    assert await actions.record_item(record.id, 1, Outcome.SKIPPED, "is Completed", "r1", LATER)
    assert await actions.record_item(record.id, 2, Outcome.FAILED, "broke", "r1", LATER)
    assert not await actions.record_item(record.id, 7, Outcome.DONE, None, "r1", LATER)
    stored = await actions.get_action(record.id)
    assert stored is not None
    assert (stored.done, stored.skipped, stored.failed, stored.heartbeat_at) == (1, 1, 1, LATER)
    reasons = await actions.action_items(record.id, (Outcome.SKIPPED, Outcome.FAILED), 10)
    assert [(i.operation_id, i.outcome, i.reason) for i in reasons] == [
        (operations[1], Outcome.SKIPPED, "is Completed"),
        (operations[2], Outcome.FAILED, "broke"),
    ]
    assert await actions.end_action(record.id, ActionStatus.COMPLETED, LATER, runner="r2") is None
    ended = await actions.end_action(record.id, ActionStatus.COMPLETED, LATER, runner="r1")
    assert ended is not None and ended.status is ActionStatus.COMPLETED
    assert (ended.completed_at, ended.runner) == (LATER, None)
    assert await actions.end_action(record.id, ActionStatus.CANCELLED, LATER) is None
    assert await actions.claim_action("r2", LATER, LATER + timedelta(hours=1)) is None


async def test_a_cancelled_action_records_nothing_more(actions: ActionStore) -> None:
    record = make_action()
    await actions.add_action(record, [uuid.uuid4(), uuid.uuid4()])
    await actions.claim_action("r1", BASE_TIME, BASE_TIME)
    cancelled = await actions.end_action(record.id, ActionStatus.CANCELLED, LATER)
    assert cancelled is not None and cancelled.status is ActionStatus.CANCELLED
    assert not await actions.record_item(record.id, 0, Outcome.DONE, None, "r1", LATER)
    assert not await actions.heartbeat_action(record.id, "r1", LATER)
    assert len(await actions.action_items(record.id, (Outcome.PENDING,), 10)) == 2


async def test_lists_are_newest_first_and_scoped_to_a_tenant(actions: ActionStore) -> None:
    acme = [make_action(i, tenant="acme") for i in range(3)]
    globex = make_action(10, tenant="globex")
    for record in (*acme, globex):
        await actions.add_action(record, [])
    everything = await actions.list_actions(tenant=None, scoped=False, page=1, page_size=10)
    assert [r.id for r in everything.items] == [globex.id, *[r.id for r in reversed(acme)]]
    first = await actions.list_actions(tenant="acme", scoped=True, page=1, page_size=2)
    assert (first.total_count, first.has_next_page) == (3, True)
    assert [r.id for r in first.items] == [acme[2].id, acme[1].id]
    second = await actions.list_actions(tenant="acme", scoped=True, page=2, page_size=2)
    assert [r.id for r in second.items] == [acme[0].id]
    none = await actions.list_actions(tenant="initech", scoped=True, page=1, page_size=2)
    assert none.total_count == 0 and list(none.items) == []
