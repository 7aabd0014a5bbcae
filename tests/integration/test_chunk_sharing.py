"""Chunks shared fairly within a process: a tenant whose runs are at their caps beside a
tenant with more operations runs another chunk of its operation at once, while an operation
alone keeps its MaxRowConcurrency however it is split."""

from __future__ import annotations

import httpx
import pytest

from tests.integration import chunk_operations as ops
from tests.integration.conftest import ClientFactory, create_ok, wait_status, wait_until

CHUNK_ROWS = 10


@pytest.fixture(autouse=True)
def _reset() -> None:
    ops.reset()


def rows(prefix: str, count: int) -> str:
    return "name\n" + "".join(f"{prefix}{n}\n" for n in range(1, count + 1))


async def create_paced(client: httpx.AsyncClient, content: str, created_by: str) -> str:
    return await create_ok(
        client,
        content,
        operation="chunked-paced",
        metadata={"delayMs": 20},
        extra={"createdBy": created_by},
    )


async def cancel_all(client: httpx.AsyncClient, ids: list[str]) -> None:
    for operation_id in ids:
        await client.post(f"/api/bulks/{operation_id}/cancel")
    for operation_id in ids:
        await wait_status(client, operation_id)


async def test_a_second_tenant_runs_two_chunks_at_once_beside_a_first_tenants_six(
    make_client: ClientFactory,
) -> None:
    # Four row slots, one row at a time per run: bob's one run would get a quarter.
    client = await make_client(
        ops.ALL, chunk_rows=CHUNK_ROWS, worker_count=4, max_row_concurrency=1
    )
    alice = [await create_paced(client, rows(f"a{n}-", 400), "alice") for n in range(6)]

    async def alice_runs() -> bool:
        return sum(ops.DONE[i] for i in alice) > 0

    await wait_until(alice_runs, what="alice's first rows")
    bob = await create_paced(client, rows("b", 400), "bob")

    async def bob_runs_two() -> bool:
        return ops.MOST_IN_FLIGHT[bob] >= 2

    await wait_until(bob_runs_two, timeout=30, what="bob's operation running two chunks")
    start_alice, start_bob = sum(ops.DONE[i] for i in alice), ops.DONE[bob]

    async def bob_advanced() -> bool:
        return ops.DONE[bob] >= start_bob + 60

    await wait_until(bob_advanced, timeout=30, what="bob's rows")
    alice_rows = sum(ops.DONE[i] for i in alice) - start_alice
    bob_rows = ops.DONE[bob] - start_bob
    await cancel_all(client, [*alice, bob])

    assert alice_rows > 0  # both progress
    # Equal shares of four slots: bob's one operation about as many rows as alice's six.
    assert bob_rows >= 0.35 * (alice_rows + bob_rows), (bob_rows, alice_rows)
    # Alice's runs keep their caps. One of her operations may run a second chunk beside its
    # first only while the share finds her below her part for a moment (as runs end and
    # others are claimed), never more than that.
    assert max(ops.MOST_IN_FLIGHT[i] for i in alice) <= 2


async def test_an_operation_alone_keeps_its_row_concurrency_when_split(
    make_client: ClientFactory,
) -> None:
    # Eight row slots, two rows at a time per run: six would stay free.
    client = await make_client(
        ops.ALL, chunk_rows=CHUNK_ROWS, worker_count=4, max_row_concurrency=2
    )
    operation_id = await create_paced(client, rows("r", 120), "alice")

    status = await wait_status(client, operation_id, timeout=60)

    assert (status["status"], status["processedRows"]) == ("Completed", 120)
    assert ops.MOST_IN_FLIGHT[operation_id] == 2


async def test_one_tenants_operations_keep_their_caps_beside_free_slots(
    make_client: ClientFactory,
) -> None:
    client = await make_client(
        ops.ALL, chunk_rows=CHUNK_ROWS, worker_count=4, max_row_concurrency=1
    )
    ids = [
        await create_paced(client, rows(f"r{n}-", 60), created)
        for n, created in enumerate(["alice", "alice", "bob"])
    ]

    for operation_id in ids:
        status = await wait_status(client, operation_id, timeout=60)
        assert status["status"] == "Completed"
    # Three runs at their caps leave a slot free: nobody is held back, nobody runs two.
    assert [ops.MOST_IN_FLIGHT[i] for i in ids] == [1, 1, 1]
