"""Retry in a split deployment: the API resets rows, a separate worker reprocesses them."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.conftest import Process, serve, status_of, wait_terminal


def test_a_restarted_worker_picks_up_a_retry_made_through_the_api(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, "--role", "api")
    worker = spawn("worker", pending_poll_interval="0.1")
    log, fail_file = tmp_path / "log", tmp_path / "fail"
    fail_file.write_text("b\n")
    metadata = {"log": str(log), "failFile": str(fail_file)}
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "e2e-retry", "metadata": json.dumps(metadata)},
        files={"file": ("rows.csv", b"name\na\nb\nc\n", "text/csv")},
    )
    operation_id = response.json()["operationId"]
    first = wait_terminal(url, operation_id)
    assert (first["status"], first["errorCount"]) == ("CompletedWithErrors", 1)

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    fail_file.write_text("")  # the cause is fixed
    retried = httpx.post(f"{url}/api/bulks/{operation_id}/retry")
    assert retried.json() == {"rowsSubmitted": 1, "rowsSkipped": 0}
    assert status_of(url, operation_id)["status"] == "Retrying"  # no worker runs now

    spawn("worker")  # picks the Retrying operation up at start
    final = wait_terminal(url, operation_id)
    assert (final["status"], final["processedRows"], final["errorCount"]) == ("Completed", 3, 0)
    assert log.read_text().split() == ["a", "b", "c", "b"]
    history = httpx.get(f"{url}/api/bulks/{operation_id}/retry/history").json()
    assert [(h["rowNumber"], h["attempt"]) for h in history["items"]] == [(2, 0)]
