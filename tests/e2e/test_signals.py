"""Signals across real processes, and recovery after a worker is killed."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import Process, serve, status_of, wait_for, wait_terminal


def upload(url: str, content: bytes, log: Path) -> str:
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "e2e-approval", "metadata": json.dumps({"log": str(log)})},
        files={"file": ("rows.csv", content, "text/csv")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


def rows(url: str, operation_id: str, **params: Any) -> dict[int, dict[str, Any]]:
    body = httpx.get(f"{url}/api/bulks/{operation_id}/rows", params=params).json()
    return {item["rowNumber"]: item for item in body["items"]}


def waiting(url: str, operation_id: str) -> int:
    return len(rows(url, operation_id, state="WaitingForCompletion"))


def test_signal_through_the_api_resumes_a_row_held_by_another_process(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, "--role", "api")
    spawn(
        "worker", pending_poll_interval="0.1", signal_poll_interval="0.5", max_row_concurrency="4"
    )
    log = tmp_path / "log"
    operation_id = upload(url, b"name\nann\nbob\n", log)
    wait_for(lambda: waiting(url, operation_id) == 2, what="both rows waiting in the worker")

    response = httpx.post(f"{url}/api/bulks/{operation_id}/signal/ann")
    assert response.status_code == 200
    body = response.json()
    assert (body["rowNumber"], body["completed"], body["crossProcess"]) == (1, True, True)
    wait_for(
        lambda: rows(url, operation_id).get(1, {}).get("state") == "Completed",
        what="row 1 to complete in the worker",
    )
    failed = httpx.post(
        f"{url}/api/bulks/{operation_id}/signal/bob/fail", json={"errorMessage": "denied"}
    )
    assert failed.status_code == 200 and failed.json()["crossProcess"] is True
    final = wait_terminal(url, operation_id)
    assert (final["status"], final["processedRows"], final["errorCount"]) == (
        "CompletedWithErrors",
        2,
        1,
    )
    errors = httpx.get(f"{url}/api/bulks/{operation_id}/errors").json()["items"]
    assert [(e["rowNumber"], e["errorType"], e["errorMessage"]) for e in errors] == [
        (2, "SignalFailure", "denied")
    ]
    assert log.read_text().split("\n")[:-1] == ["ask ann", "ask bob", "done ann"]


def test_orphan_recovery_fails_rows_a_killed_worker_left_waiting(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, "--role", "api")
    doomed = spawn(
        "worker", pending_poll_interval="0.1", heartbeat_interval="0.2", max_row_concurrency="4"
    )
    operation_id = upload(url, b"name\nann\nbob\n", tmp_path / "log")
    wait_for(lambda: waiting(url, operation_id) == 2, what="both rows waiting")
    doomed.signal(signal.SIGKILL)
    doomed.wait()
    killed_at = time.monotonic()
    assert status_of(url, operation_id)["status"] == "Running"  # nobody cleaned up

    # Recovery only touches operations whose worker has been silent for the orphan age.
    wait_for(lambda: time.monotonic() - killed_at > 1.5, what="the orphan age to pass")
    spawn(
        "worker",
        pending_poll_interval="0.1",
        heartbeat_interval="0.2",
        enable_orphaned_step_recovery="true",
        orphan_age="1",
    )
    final = wait_terminal(url, operation_id)
    assert final["status"] == "Failed"
    detail = httpx.get(f"{url}/api/bulks/{operation_id}").json()
    assert detail["errorMessage"].startswith("Recovery:")
    assert (detail["errorCount"], detail["processedRows"]) == (2, 2)
    errors = httpx.get(f"{url}/api/bulks/{operation_id}/errors").json()["items"]
    assert {(e["errorType"], e["errorMessage"]) for e in errors} == {
        ("SignalFailure", "Recovery: step was waiting for signal when application restarted")
    }
