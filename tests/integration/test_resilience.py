"""Defects the resilience work fixed, over HTTP: progress while rows wait, and a retried
async step's timeout."""

from __future__ import annotations

import httpx

from tests.integration.conftest import wait_status, wait_until
from tests.integration.test_pipelines import client, create, rows_of

__all__ = ["client"]


async def test_a_signalled_row_is_stored_while_the_others_keep_waiting(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await create(client, "approval", "name,approver\nann,a\nbob,b\ncy,c\n")

    async def all_waiting() -> bool:
        rows = await rows_of(client, operation_id, state="WaitingForCompletion")
        return len(rows) == 3

    await wait_until(all_waiting, what="three rows waiting")
    assert (await client.post(f"/api/bulks/{operation_id}/signal/b")).status_code == 200

    async def bob_stored() -> bool:
        rows = await rows_of(client, operation_id)
        status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
        return rows[2]["state"] == "Completed" and status["processedRows"] == 1

    # Nothing else finishes: only the recorder's timer can store bob's row.
    await wait_until(bob_stored, timeout=10, what="bob's row and counters stored")
    rows = await rows_of(client, operation_id)
    assert [rows[n]["state"] for n in (1, 3)] == ["WaitingForCompletion"] * 2
    for key in ("a", "c"):
        await client.post(f"/api/bulks/{operation_id}/signal/{key}")
    assert (await wait_status(client, operation_id))["status"] == "Completed"


async def test_a_retried_signal_step_gets_its_whole_timeout_again(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await create(client, "approval-retry", "name,approver\nann,a\n")
    first = await wait_status(client, operation_id, timeout=30)
    assert (first["status"], first["errorCount"]) == ("CompletedWithErrors", 1)
    (error,) = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"]
    assert error["errorType"] == "Timeout"

    retried = await client.post(f"/api/bulks/{operation_id}/retry")
    assert retried.json() == {"rowsSubmitted": 1, "rowsSkipped": 0}

    async def waiting_again() -> bool:
        rows = await rows_of(client, operation_id)
        return rows[1]["state"] == "WaitingForCompletion" and rows[1]["retryAttempt"] == 1

    # The first attempt's clock ran out long ago; the retried wait has its own.
    await wait_until(waiting_again, timeout=10, what="the retried row waiting again")
    signalled = await client.post(f"/api/bulks/{operation_id}/signal/a")
    assert signalled.status_code == 200, signalled.text
    final = await wait_status(client, operation_id)
    assert (final["status"], final["errorCount"]) == ("Completed", 0)
