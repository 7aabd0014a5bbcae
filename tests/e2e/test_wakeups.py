"""PostgreSQL wake-ups between real processes: with every poll interval at a minute, work
created through an API process, chunks split by one worker and signals recorded by the API
still reach the workers at once (LISTEN/NOTIFY)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Process, serve, wait_for, wait_terminal
from tests.e2e.test_faults import assert_each_row_ran_once_except, submit
from tests.e2e.test_scale_out import chunks_processed_by

pytestmark = pytest.mark.postgres

SLOW_POLLS: dict[str, Any] = {
    "pending_poll_interval": 60,
    "signal_poll_interval": 60,
    "heartbeat_interval": 20,
    "abandon_after": 120,
}
# Well under every poll interval: only a wake-up can make it.
DEADLINE = 30


def listening_worker(spawn: Callable[..., Process], **env: Any) -> Process:
    worker = spawn("worker", **SLOW_POLLS, **env)
    wait_for(lambda: "Listening for wake-ups" in worker.output(), timeout=120, what="listening")
    return worker


def test_created_work_and_chunks_wake_every_worker(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    database: dict[str, Any] = {"database_url": empty_postgres_url, "chunk_rows": 50}
    _, url = serve(spawn, "--role", "api", **database)
    workers = [listening_worker(spawn, max_row_concurrency=5, **database) for _ in range(2)]
    log = tmp_path / "side-effects.log"
    started = time.monotonic()

    operation_id = submit(url, log, rows=400, delay_ms=20)
    final = wait_terminal(url, operation_id, timeout=DEADLINE)

    assert final["status"] == "Completed"
    assert time.monotonic() - started < DEADLINE
    assert_each_row_ran_once_except(log, 400, set())
    assert all(chunks_processed_by(worker, operation_id) for worker in workers)


def test_a_signal_through_the_api_wakes_the_worker_holding_the_row(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    database: dict[str, Any] = {"database_url": empty_postgres_url}
    _, url = serve(spawn, "--role", "api", **database)
    response = httpx.post(
        f"{url}/api/bulks",
        data={
            "operationName": "e2e-approval",
            "metadata": json.dumps({"log": str(tmp_path / "steps.log")}),
        },
        files={"file": ("rows.csv", b"name\nann\n", "text/csv")},
    )
    assert response.status_code == 201, response.text
    operation_id = response.json()["operationId"]
    listening_worker(spawn, **database)  # takes the operation when it starts
    wait_for(
        lambda: httpx.post(f"{url}/api/bulks/{operation_id}/signal/ann").status_code == 200,
        timeout=DEADLINE,
        what="the row to wait for its signal",
    )
    signalled = time.monotonic()

    final = wait_terminal(url, operation_id, timeout=DEADLINE)

    assert final["status"] == "Completed"
    assert time.monotonic() - signalled < DEADLINE
