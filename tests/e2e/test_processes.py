"""Real processes: a combined instance, and an API instance with a separate worker."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.conftest import (
    Process,
    serve,
    status_of,
    wait_for,
    wait_terminal,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "users.csv"


def upload(url: str, content: bytes, operation: str, metadata: dict[str, str], name: str) -> str:
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": operation, "metadata": json.dumps(metadata)},
        files={"file": (name, content, "text/csv")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


def test_serve_processes_the_example_file(spawn: Callable[..., Process]) -> None:
    _, url = serve(spawn)
    operation_id = upload(
        url, EXAMPLE.read_bytes(), "import-users", {"requestedBy": "e2e"}, "users.csv"
    )
    status = wait_terminal(url, operation_id)
    assert status["status"] == "CompletedWithErrors"
    assert (status["totalRows"], status["processedRows"], status["errorCount"]) == (8, 8, 3)
    errors = httpx.get(f"{url}/api/bulks/{operation_id}/errors").json()["items"]
    by_row = {e["rowNumber"]: (e["errorType"], e["errorMessage"]) for e in errors}
    assert by_row[4] == ("Validation", "Invalid email address 'edsger@example'")
    assert by_row[5][0] == "Validation" and by_row[5][1].startswith("age:")
    assert by_row[6] == (
        "Processing",
        "Mail server rejected ken@blocked.example: domain is blocked",
    )
    events = httpx.get(f"{url}/api/bulks/{operation_id}/events").json()
    assert next(e["type"] for e in events) == "Created"
    assert [e["type"] for e in events][-1] == "Completed"


def gate_metadata(tmp_path: Path) -> dict[str, str]:
    return {"gate": str(tmp_path / "gate"), "log": str(tmp_path / "processed.log")}


def processed(tmp_path: Path) -> list[str]:
    log = tmp_path / "processed.log"
    return log.read_text().split() if log.exists() else []


def test_api_and_worker_share_sqlite_and_cancel_is_honoured(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, "--role", "api")
    metadata = gate_metadata(tmp_path)
    first = upload(url, b"name\na\nb\n", "file-gated", metadata, "a.csv")
    assert status_of(url, first)["status"] == "Pending"  # the API never processes

    worker = spawn("worker", pending_poll_interval="0.1")
    assert wait_terminal(url, first)["status"] == "Completed"
    assert processed(tmp_path) == ["a", "b"]

    second = upload(url, b"name\nc\nwait-d\ne\nf\n", "file-gated", metadata, "b.csv")
    wait_for(lambda: processed(tmp_path)[-1:] == ["c"], what="row c to be processed")
    response = httpx.post(f"{url}/api/bulks/{second}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "Cancelled"
    # The worker notices at its next status check; the waiting row is interrupted.
    wait_for(
        lambda: f"Left operation {second}: cancelled" in worker.output(),
        what="the worker to leave the cancelled operation",
    )
    assert status_of(url, second)["processedRows"] == 1  # row c was recorded
    (tmp_path / "gate").touch()
    third = upload(url, b"name\ng\n", "file-gated", metadata, "c.csv")
    assert wait_terminal(url, third)["status"] == "Completed"
    assert processed(tmp_path) == ["a", "b", "c", "g"]  # d, e, f never ran
    final = status_of(url, second)
    assert (final["status"], final["processedRows"]) == ("Cancelled", 1)


def test_stopped_worker_releases_and_the_next_resumes_without_rerunning(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, "--role", "api")
    metadata = gate_metadata(tmp_path)
    operation_id = upload(url, b"name\na\nb\nwait-c\nd\n", "file-gated", metadata, "a.csv")
    worker = spawn("worker", pending_poll_interval="0.1", shutdown_timeout="0.5")
    wait_for(lambda: processed(tmp_path) == ["a", "b"], what="rows a and b")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    status = status_of(url, operation_id)
    assert (status["status"], status["processedRows"]) == ("Pending", 2)

    (tmp_path / "gate").touch()
    spawn("worker", pending_poll_interval="0.1")
    final = wait_terminal(url, operation_id)
    assert (final["status"], final["processedRows"], final["totalRows"]) == ("Completed", 4, 4)
    assert processed(tmp_path) == ["a", "b", "wait-c", "d"]


def test_every_line_of_serve_is_json_when_asked_requests_included(
    spawn: Callable[..., Process],
) -> None:
    process, url = serve(spawn, log_format="json")
    operation_id = upload(
        url, EXAMPLE.read_bytes(), "import-users", {"requestedBy": "e2e"}, "users.csv"
    )
    wait_terminal(url, operation_id)
    access = f'"GET /api/bulks/{operation_id}/status HTTP/1.1" 200'

    def entries() -> list[dict[str, str]]:
        return [json.loads(line) for line in process.output().splitlines() if line.strip()]

    wait_for(
        lambda: any(access in e["message"] for e in entries()),
        what="the access line of a status poll",
    )
    logged = entries()

    assert any(e["logger"] == "uvicorn.access" and access in e["message"] for e in logged)
    assert any(
        e["logger"] == "uvicorn.error" and "startup complete" in e["message"] for e in logged
    )
