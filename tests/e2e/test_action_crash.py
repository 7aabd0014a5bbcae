"""A bulk action survives the death of the process running it: another process takes it
over, and every matched operation is acted on exactly once (none skipped, none twice)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import Process, serve, wait_for, wait_terminal

OPERATIONS = 8


def test_a_killed_runner_neither_skips_nor_repeats_an_operation(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    # A slow pace, so that the kill falls in the middle of the action; a short abandon
    # time, so that the survivor takes it over within seconds.
    timing = {"action_rate": "3", "abandon_after": "2", "heartbeat_interval": "0.5"}
    first, url = serve(spawn, **timing)
    fail_file = tmp_path / "fail"
    fail_file.write_text("bad\n")
    created = []
    for number in range(OPERATIONS):
        metadata = {"log": str(tmp_path / f"log-{number}"), "failFile": str(fail_file)}
        response = httpx.post(
            f"{url}/api/bulks",
            data={"operationName": "e2e-retry", "metadata": json.dumps(metadata)},
            files={"file": ("rows.csv", b"name\nok\nbad\n", "text/csv")},
        )
        assert response.status_code == 201, response.text
        created.append(response.json()["operationId"])
    for operation_id in created:
        assert wait_terminal(url, operation_id)["status"] == "CompletedWithErrors"
    fail_file.write_text("")  # the downstream service is back

    body = {"action": "retry", "filter": {"operationName": "e2e-retry"}}
    started = httpx.post(f"{url}/api/actions", json=body)
    assert started.status_code == 202, started.text
    action_id = started.json()["id"]
    assert started.json()["matched"] == OPERATIONS

    def progress() -> dict[str, Any]:
        found: dict[str, Any] = httpx.get(f"{url}/api/actions/{action_id}").json()
        return found

    wait_for(lambda: progress()["done"] >= 2, what="the first operations retried")
    first.signal(signal.SIGKILL)
    first.wait()

    _, url = serve(spawn, **timing)
    assert progress()["done"] < OPERATIONS  # the kill came before the end
    wait_for(lambda: progress()["status"] == "Completed", timeout=120, what="the action")
    ended = progress()
    assert (ended["done"], ended["skipped"], ended["failed"]) == (OPERATIONS, 0, 0), ended
    assert ended["items"] == []
    for operation_id in created:
        final = wait_terminal(url, operation_id, timeout=120)
        assert (final["status"], final["errorCount"]) == ("Completed", 0)
        detail = httpx.get(f"{url}/api/bulks/{operation_id}").json()
        assert detail["retryCount"] == 1
        history = httpx.get(f"{url}/api/bulks/{operation_id}/retry/history").json()
        assert [(h["rowNumber"], h["attempt"]) for h in history["items"]] == [(2, 0)]
