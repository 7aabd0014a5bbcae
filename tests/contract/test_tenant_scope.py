"""Tenants in storage: lists, counts and feeds of one tenant, and the active limit, on memory,
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text

from bulkops.storage.lifecycle import created_event
from bulkops.storage.records import (
    ActiveLimit,
    IdempotencyKey,
    KeyInUse,
    LimitReached,
    OperationQuery,
)
from bulkops.storage.states import OperationStatus

if TYPE_CHECKING:
    from tests.contract.conftest import MakeOperation, Stores


async def test_the_tenant_round_trips_and_scopes_lists_and_counts(
    stores: Stores, make_operation: MakeOperation
) -> None:
    acme = [make_operation(tenant="acme") for _ in range(3)]
    globex = make_operation(tenant="globex", status=OperationStatus.COMPLETED)
    untenanted = make_operation()
    for record in (*acme, globex, untenanted):
        await stores.operations.add(record, [created_event(record, record.created_at)])

    assert (await stores.operations.get(acme[0].id)) == acme[0]
    assert (await stores.operations.get(untenanted.id)) == untenanted
    page = await stores.operations.list(OperationQuery(page_size=2, tenant="acme"))
    assert [r.id for r in page.items] == [acme[2].id, acme[1].id] and page.total_count == 3
    assert (await stores.operations.list(OperationQuery())).total_count == 5
    assert await stores.operations.status_counts("globex") == {OperationStatus.COMPLETED: 1}
    assert await stores.operations.status_counts("acme") == {OperationStatus.PENDING: 3}
    assert await stores.operations.status_counts() == {
        OperationStatus.PENDING: 4,
        OperationStatus.COMPLETED: 1,
    }


async def test_events_carry_their_operations_tenant_and_feed_by_it(
    stores: Stores, make_operation: MakeOperation
) -> None:
    acme, globex, untenanted = (
        make_operation(tenant="acme"),
        make_operation(tenant="globex"),
        make_operation(),
    )
    for record in (acme, globex, untenanted, make_operation(tenant="acme")):
        await stores.operations.add(record, [created_event(record, record.created_at)])

    every = await stores.events.read(after=0, limit=100)
    assert [e.tenant for e in every] == ["acme", "globex", None, "acme"]
    mine = await stores.events.read(after=0, limit=100, tenant="acme")
    assert [e.tenant for e in mine] == ["acme", "acme"]
    newest = await stores.events.read(after=None, limit=1, tenant="globex")
    assert [e.operation_id for e in newest] == [globex.id]
    assert await stores.events.read(after=0, limit=100, operation_id=acme.id, tenant="globex") == []
    assert await stores.events.read(after=mine[-1].sequence, limit=10, tenant="acme") == []


async def test_the_active_limit_counts_a_tenants_pending_running_and_retrying(
    stores: Stores, make_operation: MakeOperation
) -> None:
    limit = ActiveLimit(2)
    for status in (OperationStatus.RUNNING, OperationStatus.COMPLETED, OperationStatus.FAILED):
        assert await stores.operations.add(make_operation(tenant="acme", status=status)) is None
    assert await stores.operations.add(make_operation(tenant="acme"), limit=limit) is None
    refused = make_operation(tenant="acme")
    assert await stores.operations.add(refused, limit=limit) == LimitReached(2)
    assert await stores.operations.get(refused.id) is None
    # Another tenant, and the same creator without a tenant, count apart.
    assert await stores.operations.add(make_operation(tenant="globex"), limit=limit) is None
    for _ in range(2):
        assert await stores.operations.add(make_operation(), limit=limit) is None
    assert await stores.operations.add(make_operation(), limit=limit) == LimitReached(2)
    other_creator = make_operation(created_by="eve@example.com")
    assert await stores.operations.add(other_creator, limit=limit) is None


async def test_concurrent_adds_never_pass_the_active_limit(
    stores: Stores, make_operation: MakeOperation
) -> None:
    records = [make_operation(tenant="acme") for _ in range(8)]
    answers = await asyncio.gather(
        *(stores.operations.add(record, limit=ActiveLimit(3)) for record in records)
    )
    assert sum(answer is None for answer in answers) == 3
    assert all(isinstance(a, LimitReached) for a in answers if a is not None)
    assert (await stores.operations.list(OperationQuery(tenant="acme"))).total_count == 3


async def test_a_refused_add_records_no_idempotency_key_and_a_replay_wins(
    stores: Stores, make_operation: MakeOperation
) -> None:
    first = make_operation(tenant="acme")
    expired = first.created_at - timedelta(days=1)
    key = IdempotencyKey(first.created_by, "k1", "f1", expired)
    assert await stores.operations.add(first, idempotency=key, limit=ActiveLimit(1)) is None
    replay = await stores.operations.add(
        make_operation(tenant="acme"), idempotency=key, limit=ActiveLimit(1)
    )
    assert replay == KeyInUse(first.id, "f1")
    other = IdempotencyKey(first.created_by, "k2", "f2", expired)
    refused = make_operation(tenant="acme")
    assert await stores.operations.add(refused, idempotency=other, limit=ActiveLimit(1)) == (
        LimitReached(1)
    )
    later = make_operation(tenant="acme")
    assert await stores.operations.add(later, idempotency=other) is None  # k2 was free


PLANS = [
    (
        "SELECT count(*) FROM operations WHERE status IN ('Pending', 'Running', 'Retrying') "
        "AND tenant = 'acme'",
        "ix_operations_tenant_status",
    ),
    (
        "SELECT * FROM operations WHERE tenant = 'acme' ORDER BY created_at DESC, id LIMIT 25",
        "ix_operations_tenant_created_at",
    ),
    (
        "SELECT * FROM events WHERE tenant = 'acme' AND sequence > 10 ORDER BY sequence LIMIT 100",
        "ix_events_tenant_sequence",
    ),
]


@pytest.mark.parametrize(("sql", "index"), PLANS)
async def test_a_tenants_reads_use_its_own_index_entries(
    stores: Stores, sql: str, index: str
) -> None:
    """A tenant's active count, list page and feed read only its entries of a partial index,
    in order (no sort), however many operations other tenants or it has finished."""
    if stores.database is None:
        pytest.skip("query plans are a SQL matter")
    async with stores.database.read() as conn:
        if stores.kind == "sqlite":
            rows = (await conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"))).all()
            plan = " | ".join(str(row[-1]) for row in rows)
        else:
            await conn.execute(text("SET LOCAL enable_seqscan = off"))
            plan = " | ".join(str(row[0]) for row in await conn.execute(text(f"EXPLAIN {sql}")))
    assert index in plan, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
