"""Retrying failed rows over HTTP: eligibility, resume at the failed step, history."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration import retry_operations as rops
from tests.integration.conftest import ClientFactory, create_ok, wait_status


@pytest.fixture(autouse=True)
def _reset() -> None:
    rops.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {"step_retry_delay": 0}
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(rops.ALL, **options)


async def run(client: httpx.AsyncClient, operation: str, csv: str) -> str:
    operation_id = await create_ok(client, csv, operation=operation, metadata={})
    await wait_status(client, operation_id)
    return operation_id


def steps_run(name: str) -> list[str]:
    return [step for who, step in rops.LOG if who == name]


async def retry(client: httpx.AsyncClient, operation_id: str, **kwargs: Any) -> httpx.Response:
    path = f"/api/bulks/{operation_id}/retry"
    if "rows" in kwargs:
        return await client.post(path + "/rows", json={"rowNumbers": kwargs["rows"]})
    return await client.post(path)


async def test_retry_resumes_at_the_failed_step_and_runs_every_later_step(
    client: httpx.AsyncClient,
) -> None:
    rops.FAILURES[("x", "B")] = 1
    operation_id = await run(client, "four-steps", "name\nok\nx\n")
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    assert (status["status"], status["errorCount"]) == ("CompletedWithErrors", 1)
    assert steps_run("x") == ["A", "B"]

    eligibility = (await client.get(f"/api/bulks/{operation_id}/retry/eligibility")).json()
    assert eligibility == {"isEligible": True}
    response = await retry(client, operation_id)
    assert response.status_code == 200
    assert response.json() == {"rowsSubmitted": 1, "rowsSkipped": 0}
    final = await wait_status(client, operation_id)
    assert (final["status"], final["processedRows"], final["errorCount"]) == ("Completed", 2, 0)
    # Step A ran once: the retry resumed at B and went on through C and D.
    assert steps_run("x") == ["A", "B", "B", "C", "D"]
    assert steps_run("ok") == ["A", "B", "C", "D"]

    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert (detail["retryCount"], detail["successfulRows"]) == (1, 2)
    rows = (await client.get(f"/api/bulks/{operation_id}/rows")).json()["items"]
    x = rows[1]
    assert (x["state"], x["retryAttempt"], x["completedSteps"]) == ("Completed", 1, 4)
    assert x["steps"][0]["attempts"] == 1 and x["steps"][1]["attempts"] == 2
    events = [e["type"] for e in (await client.get(f"/api/bulks/{operation_id}/events")).json()]
    # CompletedWithErrors -> Retrying, then the round ends from Retrying (as the spec's table).
    assert events[-3:] == ["Completed", "StatusChanged", "Completed"]


async def test_a_row_failing_again_keeps_every_snapshot(client: httpx.AsyncClient) -> None:
    rops.FAILURES[("x", "C")] = 2
    operation_id = await run(client, "four-steps", "name\nx\n")
    assert (await retry(client, operation_id)).json()["rowsSubmitted"] == 1
    again = await wait_status(client, operation_id)
    assert again["status"] == "CompletedWithErrors"
    error = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"][0]
    assert (error["retryAttempt"], error["stepIndex"], error["stepName"]) == (1, 2, "C")
    assert (await retry(client, operation_id)).json()["rowsSubmitted"] == 1
    assert (await wait_status(client, operation_id))["status"] == "Completed"
    assert steps_run("x") == ["A", "B", "C", "C", "C", "D"]

    history = (await client.get(f"/api/bulks/{operation_id}/retry/history")).json()
    assert history["totalCount"] == 2
    entries = [
        (h["rowNumber"], h["attempt"], h["stepIndex"], h["errorType"]) for h in history["items"]
    ]
    assert entries == [(1, 0, 2, "StepFailure"), (1, 1, 2, "StepFailure")]
    assert history["items"][0]["errorMessage"] == "C failed for x"
    assert history["items"][0]["failedAt"].endswith("Z")
    rows = (await client.get(f"/api/bulks/{operation_id}/rows")).json()["items"]
    assert rows[0]["retryAttempt"] == 2
    filtered = (await client.get(f"/api/bulks/{operation_id}/retry/history?rowNumber=2")).json()
    assert filtered["totalCount"] == 0


async def test_rows_whose_step_forbids_retry_are_skipped_with_reasons(
    client: httpx.AsyncClient,
) -> None:
    rops.FAILURES[("early", "A")] = 1
    rops.FAILURES[("late", "Send")] = 1
    rops.FAILURES[("late2", "Send")] = 1
    csv = "name,size\nearly,1\nlate,1\nlate2,1\nbad,notanumber\nfine,1\n"
    operation_id = await run(client, "guarded", csv)

    chosen = await retry(client, operation_id, rows=[2, 4, 5, 99, 2])
    assert chosen.status_code == 200
    body = chosen.json()
    assert (body["rowsSubmitted"], body["rowsSkipped"]) == (0, 4)
    assert body["skippedReasons"] == [
        "Row 2 failed at step 'Send', which does not allow retry",
        "Row 4 failed validation, which is never retried",
        "Row 5 has not failed (it is Completed)",
        "Row 99 does not exist or was never processed",
    ]
    unchanged = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert (unchanged["status"], unchanged["retryCount"]) == ("CompletedWithErrors", 0)

    everything = (await retry(client, operation_id)).json()
    assert everything == {
        "rowsSubmitted": 1,
        "rowsSkipped": 2,
        "skippedReasons": ["2 rows failed at step 'Send', which does not allow operation retry"],
    }
    final = await wait_status(client, operation_id)
    # The validation failure and the two Send failures still count as errors.
    assert (final["status"], final["processedRows"], final["errorCount"]) == (
        "CompletedWithErrors",
        5,
        3,
    )
    assert steps_run("early") == ["A", "A", "Send"]
    assert steps_run("late") == ["A", "Send"]


async def test_row_based_operations_retry_at_step_zero(client: httpx.AsyncClient) -> None:
    rops.FAILURES[("x", "process")] = 1
    operation_id = await run(client, "row-retry", "name\nx\ny\n")
    error = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"][0]
    assert (error["stepIndex"], error["stepName"]) == (0, "process")
    assert (await retry(client, operation_id, rows=[1])).json()["rowsSubmitted"] == 1
    final = await wait_status(client, operation_id)
    assert (final["status"], final["errorCount"]) == ("Completed", 0)
    assert steps_run("x") == ["process", "process"] and steps_run("y") == ["process"]
    rows = (await client.get(f"/api/bulks/{operation_id}/rows")).json()["items"]
    assert [r["retryAttempt"] for r in rows] == [1, 0]


async def eligibility(client: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/bulks/{operation_id}/retry/eligibility")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    refused = await retry(client, operation_id)
    assert refused.status_code == 409
    assert refused.json() == {
        "error": f"Cannot retry operation: {body['reason']}",
        "reason": body["reason"],
    }
    assert body["isEligible"] is False
    return body


async def test_every_ineligibility_reason(client: httpx.AsyncClient) -> None:
    completed = await run(client, "four-steps", "name\nok\n")
    assert (await eligibility(client, completed))["reason"] == (
        "Operation is Completed; only CompletedWithErrors operations can be retried"
    )
    rops.FAILURES[("x", "process")] = 1
    not_retryable = await run(client, "not-retryable", "name\nx\n")
    assert (await eligibility(client, not_retryable))["reason"] == (
        "Operation 'not-retryable' is not retryable"
    )
    rops.FAILURES[("x", "process")] = 1
    untracked = await run(client, "untracked", "name,size\nx,1\n")
    assert (await eligibility(client, untracked))["reason"] == (
        "TrackRowData must be enabled for retry"
    )
    only_invalid = await run(client, "four-steps", "name,size\nx,NaNx\n")
    assert (await eligibility(client, only_invalid))["reason"] == (
        "No failed rows can be retried: validation failures are never retried"
    )


async def test_retry_limit(make_client: ClientFactory) -> None:
    client = await make_client(rops.ALL, step_retry_delay=0, max_retry_attempts=1)
    rops.FAILURES[("x", "B")] = 5
    operation_id = await run(client, "four-steps", "name\nx\n")
    assert (await retry(client, operation_id)).status_code == 200
    await wait_status(client, operation_id)
    body = await eligibility(client, operation_id)
    assert body["reason"] == "Retry limit reached: 1 of 1 attempts used"


async def test_unlimited_retries_with_zero(make_client: ClientFactory) -> None:
    client = await make_client(rops.ALL, step_retry_delay=0, max_retry_attempts=0)
    rops.FAILURES[("x", "B")] = 3
    operation_id = await run(client, "four-steps", "name\nx\n")
    for _ in range(3):
        assert (await retry(client, operation_id)).json()["rowsSubmitted"] == 1
        await wait_status(client, operation_id)
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert (detail["status"], detail["retryCount"]) == ("Completed", 3)


async def test_bad_retry_requests(client: httpx.AsyncClient) -> None:
    rops.FAILURES[("x", "B")] = 1
    operation_id = await run(client, "four-steps", "name\nx\n")
    base = f"/api/bulks/{operation_id}/retry/rows"
    empty = await client.post(base, json={"rowNumbers": []})
    assert empty.status_code == 400 and "at least one" in empty.json()["error"]
    for body in ({}, {"rowNumbers": "1"}, {"rowNumbers": [1, "2"]}, {"rowNumbers": [True]}):
        bad = await client.post(base, json=body)
        assert bad.status_code == 400 and "rowNumbers" in bad.json()["error"]
    not_json = await client.post(base, content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 400
    for path in ("retry/eligibility", "retry/history"):
        for some_id in (str(uuid.uuid4()), "nope"):
            assert (await client.get(f"/api/bulks/{some_id}/{path}")).status_code == 404
    for some_id in (str(uuid.uuid4()), "nope"):
        assert (await client.post(f"/api/bulks/{some_id}/retry")).status_code == 404
        missing = await client.post(f"/api/bulks/{some_id}/retry/rows", json={"rowNumbers": [1]})
        assert missing.status_code == 404
