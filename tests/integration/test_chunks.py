"""One operation processed as chunks that several slots (and workers) claim: every row once,
and counters, failures, cancel, retry and the final status as without chunks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import httpx
import pytest

from bulkops.engine.scheduler import WorkScheduler
from bulkops.storage.states import ChunkState
from tests.integration import chunk_operations as ops
from tests.integration.conftest import (
    ClientFactory,
    create_ok,
    runtime_of,
    wait_status,
    wait_until,
)

CHUNK_ROWS = 10


@pytest.fixture(autouse=True)
def _reset() -> None:
    ops.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {
        "chunk_rows": CHUNK_ROWS,
        "worker_count": 3,
        "max_row_concurrency": 4,
    }
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(ops.ALL, **options)


def csv_of(names: list[str]) -> str:
    return "name\n" + "\n".join(names) + "\n"


async def events_of(client: httpx.AsyncClient, operation_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        await client.get(f"/api/bulks/{operation_id}/events?limit=1000")
    ).json()
    return found


async def chunk_states(client: httpx.AsyncClient, operation_id: str) -> list[ChunkState]:
    chunks = runtime_of(client).stores.chunks
    states = []
    for index in range(100):
        chunk = await chunks.get_chunk(UUID(operation_id), index)
        if chunk is None:
            break
        states.append(chunk.state)
    return states


async def test_every_row_is_processed_once_and_counted(client: httpx.AsyncClient) -> None:
    names = [f"bad{n}" if n % 30 == 7 else f"row{n}" for n in range(1, 96)]
    operation_id = await create_ok(client, csv_of(names), operation="chunked", metadata={})

    status = await wait_status(client, operation_id)

    assert status["status"] == "CompletedWithErrors"
    assert (status["totalRows"], status["processedRows"]) == (95, 95)
    assert status["errorCount"] == 3
    assert ops.PROCESSED == dict.fromkeys(names, 1)  # each row exactly once
    assert await chunk_states(client, operation_id) == [ChunkState.DONE] * 10
    rows = (await client.get(f"/api/bulks/{operation_id}/rows?pageSize=200")).json()
    assert [row["rowNumber"] for row in rows["items"]] == list(range(1, 96))
    errors = (await client.get(f"/api/bulks/{operation_id}/errors")).json()
    assert [row["rowNumber"] for row in errors["items"]] == [7, 37, 67]
    events = await events_of(client, operation_id)
    assert any("split into 10 chunks" in (e.get("message") or "") for e in events)
    terminal = [e for e in events if e["type"] in {"Completed", "Failed", "Cancelled"}]
    assert len(terminal) == 1
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["successfulRows"] == 92


async def test_tolerated_failures_count_across_chunks(client: httpx.AsyncClient) -> None:
    # Bad rows in three different chunks: the third failure is one more than tolerated.
    names = [f"bad{n}" if n in (5, 15, 25) else f"row{n}" for n in range(1, 201)]
    operation_id = await create_ok(client, csv_of(names), operation="chunked-tolerant", metadata={})

    status = await wait_status(client, operation_id)

    assert status["status"] == "Failed"
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert "more than the tolerated failure count of 2" in detail["errorMessage"]
    assert sum(ops.PROCESSED.values()) < 200  # most rows never started
    assert all(count == 1 for count in ops.PROCESSED.values())


async def test_cancel_stops_every_chunk(client: httpx.AsyncClient) -> None:
    names = [f"wait{n}" if n % CHUNK_ROWS == 3 else f"row{n}" for n in range(1, 101)]
    operation_id = await create_ok(client, csv_of(names), operation="chunked-gated", metadata={})
    await wait_until(
        lambda: _true(any(n.startswith("wait") for n in ops.PROCESSED)),
        what="a chunk waiting at its gated row",
    )

    cancelled = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    status = await wait_status(client, operation_id)
    ops.GATE.set()

    assert status["status"] == "Cancelled"
    assert sum(ops.PROCESSED.values()) < 100
    events = await events_of(client, operation_id)
    assert [e["type"] for e in events].count("Cancelled") == 1


async def test_the_next_chunk_is_claimed_ahead_but_its_rows_wait(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await _gated_with_a_chunk_claimed_ahead(client)

    assert "wait19" in ops.RUNNING
    assert not any(f"row{n}" in ops.PROCESSED for n in range(21, 41))
    ops.GATE.set()
    status = await wait_status(client, operation_id)

    assert status["status"] == "Completed"
    assert ops.PROCESSED == dict.fromkeys(GATED, 1)
    assert ops.MOST_RUNNING[0] <= 4  # the operation's MaxRowConcurrency, across chunks


async def test_a_poll_claims_nothing_while_the_only_chunks_are_of_an_operation_run_here(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await _gated_with_a_chunk_claimed_ahead(client)
    runtime = runtime_of(client)
    assert isinstance(runtime.scheduler, WorkScheduler)
    dispatcher = runtime.scheduler.dispatcher  # what the process runs next

    assert await chunk_states(client, operation_id) == [
        ChunkState.DONE,
        ChunkState.RUNNING,
        ChunkState.RUNNING,
        ChunkState.PENDING,
    ]
    # Chunk 3 is claimable, but this process runs chunk 2 of its operation in turn.
    assert [await dispatcher.poll_chunks() for _ in range(3)] == [0, 0, 0]
    ops.GATE.set()
    status = await wait_status(client, operation_id)

    assert status["status"] == "Completed"
    assert ops.PROCESSED == dict.fromkeys(GATED, 1)


async def test_a_chunk_claimed_ahead_runs_no_row_once_the_operation_is_cancelled(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await _gated_with_a_chunk_claimed_ahead(client)

    cancelled = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    ops.GATE.set()  # chunk 1's last rows finish: chunk 2 would start now
    status = await wait_status(client, operation_id)

    async def both_ended() -> bool:
        return UUID(operation_id) not in runtime_of(client).scheduler.active

    await wait_until(both_ended, what="both chunks' runs to end")
    assert status["status"] == "Cancelled"
    assert not any(f"row{n}" in ops.PROCESSED for n in range(21, 41))


async def test_stopping_hands_back_a_chunk_claimed_ahead_without_running_it(
    make_client: ClientFactory,
) -> None:
    client = await make_client(ops.ALL, chunk_rows=CHUNK_ROWS, worker_count=3, shutdown_timeout=20)
    operation_id = await _gated_with_a_chunk_claimed_ahead(client)

    stopping = asyncio.create_task(runtime_of(client).scheduler.stop())

    async def handed_back() -> bool:
        states = await chunk_states(client, operation_id)
        return states[2] is ChunkState.PENDING

    await wait_until(handed_back, what="chunk 2 handed back at once")
    ops.GATE.set()  # chunk 1 finishes its rows within the shutdown timeout
    await stopping
    assert await chunk_states(client, operation_id) == [
        ChunkState.DONE,
        ChunkState.DONE,
        ChunkState.PENDING,
        ChunkState.PENDING,
    ]
    assert not any(f"row{n}" in ops.PROCESSED for n in range(21, 41))


async def test_retry_of_a_split_operation_runs_only_the_failed_rows(
    client: httpx.AsyncClient,
) -> None:
    names = [f"bad{n}" if n in (4, 44, 84) else f"row{n}" for n in range(1, 91)]
    operation_id = await create_ok(client, csv_of(names), operation="chunked", metadata={})
    assert (await wait_status(client, operation_id))["status"] == "CompletedWithErrors"
    ops.FIXED.update({"bad4", "bad44", "bad84"})

    retried = await client.post(f"/api/bulks/{operation_id}/retry", json={})
    assert retried.status_code in (200, 202), retried.text
    status = await wait_status(client, operation_id)

    assert status["status"] == "Completed" and status["errorCount"] == 0
    assert ops.PROCESSED["bad44"] == 2 and ops.PROCESSED["row43"] == 1


async def _true(value: bool) -> bool:
    return value


GATED = ["wait19" if n == 19 else f"row{n}" for n in range(1, 41)]


async def _gated_with_a_chunk_claimed_ahead(client: httpx.AsyncClient) -> str:
    """An operation of four chunks (the first one run by its claimer before the split)
    whose 19th row holds at the gate, in the second half of chunk 1: the process claims
    chunk 2 ahead, and its rows wait for chunk 1's."""
    operation_id = await create_ok(client, csv_of(GATED), operation="chunked-gated", metadata={})

    async def both_running() -> bool:
        states = await chunk_states(client, operation_id)
        return states[1:3] == [ChunkState.RUNNING] * 2

    await wait_until(both_running, what="chunk 2 claimed while chunk 1 waits at its gated row")
    return operation_id
