"""Final means final across processes: an API process cancels an operation a separate worker
is running through many fast rows; once the worker has let go, the operation says what the
cancel answered."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Process, serve, status_of, wait_for

ROWS = 60_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _events(url: str, operation_id: str) -> list[str]:
    found: list[str] = []
    since: int | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000} | ({} if since is None else {"since": since})
        page = httpx.get(f"{url}/api/bulks/{operation_id}/events", params=params).json()
        if not page:
            return found
        found += [event["type"] for event in page]
        since = page[-1]["sequence"]


def test_a_cancel_under_load_is_final(
    database: str, spawn: Callable[..., Process], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # One run (no chunks), so "the worker left it" is one line of its log.
    settings: dict[str, Any] = {"max_row_concurrency": 8, "chunk_rows": 0}
    if database == "postgres":
        settings["database_url"] = request.getfixturevalue("empty_postgres_url")
    _, url = serve(spawn, "--role", "api", **settings)
    worker = spawn("worker", pending_poll_interval="0.1", **settings)
    metadata = {"gate": str(tmp_path / "gate"), "log": str(tmp_path / "processed.log")}
    content = "name\n" + "".join(f"r{n}\n" for n in range(ROWS))
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "file-gated", "metadata": json.dumps(metadata)},
        files={"file": ("rows.csv", content.encode(), "text/csv")},
    )
    assert response.status_code == 201, response.text
    operation_id = response.json()["operationId"]
    wait_for(
        lambda: status_of(url, operation_id)["processedRows"] >= 2000,
        timeout=120,
        what="rows to be processed",
    )

    cancelled = httpx.post(f"{url}/api/bulks/{operation_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "Cancelled"
    wait_for(
        lambda: f"Left operation {operation_id}: cancelled" in worker.output(),
        timeout=60,
        what="the worker to leave the cancelled operation",
    )

    answered = cancelled.json()
    settled = httpx.get(f"{url}/api/bulks/{operation_id}").json()
    assert settled["status"] == "Cancelled"
    assert settled["processedRows"] < ROWS  # cancelled under way
    assert (settled["processedRows"], settled["errorCount"]) == (
        answered["processedRows"],
        answered["errorCount"],
    )
    report = httpx.get(f"{url}/api/bulks/{operation_id}/export", params={"format": "jsonl"})
    assert len(report.text.splitlines()) == settled["processedRows"]
    assert _events(url, operation_id)[-1] == "Cancelled"
