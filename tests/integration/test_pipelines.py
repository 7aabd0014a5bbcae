"""Pipelines over HTTP: step order, per-step retries, async steps and signals."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration import pipeline_operations as pipes
from tests.integration.conftest import ClientFactory, create_ok, wait_status, wait_until


@pytest.fixture(autouse=True)
def _reset() -> None:
    pipes.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    """An instance serving the pipeline operations with instant step backoff."""
    options: dict[str, Any] = {"step_retry_delay": 0, "max_row_concurrency": 8}
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(pipes.ALL, **options)


async def create(client: httpx.AsyncClient, operation: str, csv: str) -> str:
    return await create_ok(client, csv, operation=operation, metadata={})


async def rows_of(client: httpx.AsyncClient, operation_id: str, **params: str) -> dict[int, Any]:
    body = (
        await client.get(f"/api/bulks/{operation_id}/rows", params={"pageSize": 100, **params})
    ).json()
    return {item["rowNumber"]: item for item in body["items"]}


async def waiting_count(client: httpx.AsyncClient, operation_id: str) -> int:
    found = await rows_of(client, operation_id, state="WaitingForCompletion")
    return len(found)


async def test_discovery_shows_pipelines_and_their_steps(client: httpx.AsyncClient) -> None:
    operations = {o["name"]: o for o in (await client.get("/api/operations")).json()}
    assert operations["onboard"]["isStepBased"] is True
    assert operations["onboard"]["steps"] == ["Create account", "Validate account", "Notify"]
    assert operations["object-steps"]["steps"] == ["Announce", "Register", "Archive"]


async def test_steps_run_in_order_with_retries_and_failures_stop_the_row(
    client: httpx.AsyncClient,
) -> None:
    pipes.FLAKY["flaky"] = 2
    operation_id = await create(client, "onboard", "name\nok\nflaky\nbroken\n")
    status = await wait_status(client, operation_id)
    assert (status["status"], status["errorCount"]) == ("CompletedWithErrors", 1)
    steps_of = {
        name: [step for who, step in pipes.LOG if who == name] for name in ("ok", "flaky", "broken")
    }
    assert steps_of["ok"] == ["Create account", "Validate account", "Notify"]
    assert steps_of["flaky"] == ["Create account"] * 3 + ["Validate account", "Notify"]
    assert steps_of["broken"] == ["Create account"] * 3  # retried, then later steps never ran

    rows = await rows_of(client, operation_id)
    assert rows[2]["steps"][0]["attempts"] == 3 and rows[2]["state"] == "Completed"
    assert rows[2]["completedSteps"] == 3 and rows[2]["totalSteps"] == 3
    broken = rows[3]
    assert (broken["state"], broken["stepIndex"], broken["currentStep"]) == (
        "Failed",
        0,
        "Create account",
    )
    assert [s["state"] for s in broken["steps"]] == ["Failed", "Pending", "Pending"]
    assert broken["steps"][0]["errorType"] == "StepFailure"
    errors = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"]
    assert len(errors) == 1
    assert errors[0]["errorType"] == "StepFailure" and errors[0]["stepIndex"] == 0
    assert errors[0]["stepName"] == "Create account"
    assert errors[0]["errorMessage"] == "directory is down"


async def test_signals_complete_rows_first_in_first_out(client: httpx.AsyncClient) -> None:
    csv = "name,approver\nann,mgr\nbob,mgr\ncy,mgr\ndee,boss\n"
    operation_id = await create(client, "approval", csv)
    await wait_until(
        lambda: _count_is(client, operation_id, 4), what="four rows waiting for approval"
    )
    rows = await rows_of(client, operation_id)
    assert rows[1]["signalKey"] == f"{operation_id}:mgr:1"
    assert rows[1]["steps"][1]["state"] == "WaitingForCompletion"

    first = await client.post(f"/api/bulks/{operation_id}/signal/mgr")
    assert first.status_code == 200
    assert first.json() == {
        "rowNumber": 1,
        "stepIndex": 1,
        "stepName": "Approve",
        "completed": True,
        "failed": False,
        "crossProcess": False,
    }
    second = (await client.post(f"/api/bulks/{operation_id}/signal/mgr")).json()
    assert second["rowNumber"] == 2
    failed = await client.post(
        f"/api/bulks/{operation_id}/signal/mgr/fail", json={"errorMessage": "not approved"}
    )
    assert failed.status_code == 200
    assert (failed.json()["rowNumber"], failed.json()["failed"]) == (3, True)
    none_left = await client.post(f"/api/bulks/{operation_id}/signal/mgr")
    assert none_left.status_code == 404 and "mgr" in none_left.json()["error"]
    boss = (await client.post(f"/api/bulks/{operation_id}/signal/boss")).json()
    assert boss["rowNumber"] == 4

    status = await wait_status(client, operation_id)
    assert (status["status"], status["processedRows"], status["errorCount"]) == (
        "CompletedWithErrors",
        4,
        1,
    )
    errors = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"]
    assert [(e["rowNumber"], e["errorType"], e["errorMessage"]) for e in errors] == [
        (3, "SignalFailure", "not approved")
    ]
    assert errors[0]["signalKey"] == f"{operation_id}:mgr:3"
    finished = {who for who, step in pipes.LOG if step == "Finish"}
    assert finished == {"ann", "bob", "dee"}


FAST: dict[str, Any] = {"step_retry_delay": 0, "max_row_concurrency": 8}


async def test_a_failure_signal_is_attributed_to_its_sender(
    make_client: ClientFactory,
) -> None:
    """The RowFailed event of a row failed by ``POST .../signal/{key}/fail`` names the
    principal who sent it (``"anonymous"`` without authentication), not the service."""
    tokens = {"t-ops": {"role": "operate", "name": "olga"}}
    service = await make_client(pipes.ALL, auth_tokens=json.dumps(tokens), **FAST)
    service.headers.update({"Authorization": "Bearer t-ops"})
    operation_id = await create(service, "approval", "name,approver\nann,mgr\nbob,mgr\n")
    await wait_until(lambda: _count_is(service, operation_id, 2), what="two rows waiting")
    failed = await service.post(
        f"/api/bulks/{operation_id}/signal/mgr/fail", json={"errorMessage": "no"}
    )
    assert failed.status_code == 200, failed.text
    assert (await service.post(f"/api/bulks/{operation_id}/signal/mgr")).status_code == 200
    await wait_status(service, operation_id)
    events = (await service.get(f"/api/bulks/{operation_id}/events")).json()
    assert [e["actor"] for e in events if e["type"] == "RowFailed"] == ["olga"]

    anonymous = await make_client(pipes.ALL, **FAST)
    other = await create(anonymous, "approval", "name,approver\ncy,mgr\n")
    await wait_until(lambda: _count_is(anonymous, other, 1), what="a row waiting")
    await anonymous.post(f"/api/bulks/{other}/signal/mgr/fail", json={"errorMessage": "no"})
    await wait_status(anonymous, other)
    events = (await anonymous.get(f"/api/bulks/{other}/events")).json()
    assert [e["actor"] for e in events if e["type"] == "RowFailed"] == ["anonymous"]


async def _count_is(client: httpx.AsyncClient, operation_id: str, count: int) -> bool:
    return await waiting_count(client, operation_id) == count


async def test_an_early_signal_is_never_lost(client: httpx.AsyncClient) -> None:
    operation_id = await create(client, "approval", "name,approver\nhold-1,mgr\n")
    await wait_until(lambda: _held(), what="the action to start")
    # The action is still running, yet the row already waits under its key.
    response = await client.post(f"/api/bulks/{operation_id}/signal/mgr")
    assert response.status_code == 200 and response.json()["rowNumber"] == 1
    pipes.HOLD.open()
    status = await wait_status(client, operation_id, timeout=10)
    assert status["status"] == "Completed"
    assert ("hold-1", "Finish") in pipes.LOG


async def _held() -> bool:
    return pipes.HOLD.entered >= 1


async def test_signal_errors(client: httpx.AsyncClient) -> None:
    operation_id = await create(client, "approval", "name,approver\nann,mgr\n")
    await wait_until(lambda: _count_is(client, operation_id, 1), what="a waiting row")
    unknown = await client.post(f"/api/bulks/{uuid.uuid4()}/signal/mgr")
    assert unknown.status_code == 404 and "not found" in unknown.json()["error"]
    malformed = await client.post("/api/bulks/nope/signal/mgr")
    assert malformed.status_code == 404
    nobody = await client.post(f"/api/bulks/{operation_id}/signal/nobody")
    assert nobody.status_code == 404
    for body in ({}, {"errorMessage": ""}, {"errorMessage": 3}, [1]):
        bad = await client.post(f"/api/bulks/{operation_id}/signal/mgr/fail", json=body)
        assert bad.status_code == 400 and "errorMessage" in bad.json()["error"]
    not_json = await client.post(
        f"/api/bulks/{operation_id}/signal/mgr/fail",
        content=b"oops",
        headers={"content-type": "application/json"},
    )
    assert not_json.status_code == 400
    long_message = "x" * 5000
    failed = await client.post(
        f"/api/bulks/{operation_id}/signal/mgr/fail", json={"errorMessage": long_message}
    )
    assert failed.status_code == 200
    await wait_status(client, operation_id)
    error = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"][0]
    assert error["errorMessage"] == "x" * 2000


async def test_programmatic_signal_service_uses_full_keys(
    make_client: ClientFactory,
) -> None:
    client = await make_client(pipes.ALL, step_retry_delay=0)
    operation_id = await create(client, "approval", "name,approver\nann,mgr\n")
    await wait_until(lambda: _count_is(client, operation_id, 1), what="a waiting row")
    signals = client.runtime.signals  # type: ignore[attr-defined]
    assert await signals.signal_success(f"{operation_id}:mgr") is False  # not a full key
    assert await signals.signal_success("garbage") is False
    assert await signals.signal_success(f"{operation_id}:mgr:1") is True
    assert await signals.signal_success(f"{operation_id}:mgr:1") is False  # no longer waits
    assert (await wait_status(client, operation_id))["status"] == "Completed"


async def test_signal_step_times_out(client: httpx.AsyncClient) -> None:
    operation_id = await create(client, "approval-timeout", "name\nann\n")
    status = await wait_status(client, operation_id, timeout=10)
    assert status["status"] == "CompletedWithErrors"
    error = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"][0]
    assert error["errorType"] == "Timeout" and error["stepName"] == "Approve"
    assert error["errorMessage"] == "Step 'Approve' timed out after 0.2 s"
    assert ("ann", "Finish") not in pipes.LOG
    late = await client.post(f"/api/bulks/{operation_id}/signal/mgr")
    assert late.status_code == 404


async def test_polling_step_succeeds_or_times_out(client: httpx.AsyncClient) -> None:
    operation_id = await create(client, "provision", "name\nready-1\nnever-2\n")
    status = await wait_status(client, operation_id, timeout=10)
    assert (status["status"], status["errorCount"]) == ("CompletedWithErrors", 1)
    assert pipes.CHECKS["ready-1"] == 3
    rows = await rows_of(client, operation_id)
    assert rows[1]["state"] == "Completed"
    assert rows[2]["state"] == "Failed"
    assert rows[2]["steps"][0]["errorType"] == "Timeout"
    assert rows[2]["steps"][0]["errorMessage"] == "Step 'Provision laptop' timed out after 0.5 s"


async def test_step_objects_merge_with_methods_by_order(client: httpx.AsyncClient) -> None:
    operation_id = await create(client, "object-steps", "name\nann\n")
    assert (await wait_status(client, operation_id))["status"] == "Completed"
    assert [step for _, step in pipes.LOG] == ["Announce", "Register", "Archive"]


async def test_validation_failures_of_pipeline_rows_list_pending_steps(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await create(client, "onboard", "name,approver\nok,x\n,x\n")
    await wait_status(client, operation_id)
    rows = await rows_of(client, operation_id)
    invalid = rows[2]
    assert (invalid["stepIndex"], invalid["currentStep"]) == (-1, "validation")
    assert [s["state"] for s in invalid["steps"]] == ["Pending"] * 3
    assert invalid["completedSteps"] == 0 and invalid["totalSteps"] == 3
