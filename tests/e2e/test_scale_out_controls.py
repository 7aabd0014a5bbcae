"""Cancel and retry of one operation split over real worker processes on PostgreSQL."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.e2e.conftest import Process, serve, status_of, wait_for, wait_terminal
from tests.e2e.test_faults import runs, submit
from tests.e2e.test_scale_out import chunks_processed_by
from tests.stored_rows import postgres_rows

pytestmark = pytest.mark.postgres

CHUNK_ROWS = 100


def started_workers(spawn: Callable[..., Process], count: int, **env: Any) -> list[Process]:
    workers = [spawn("worker", pending_poll_interval="0.1", **env) for _ in range(count)]
    for worker in workers:  # all polling before the work arrives
        wait_for(lambda w=worker: "bulkops worker started" in w.output(), what="a worker")
    return workers


def chunk_states(database_url: str, operation_id: str) -> dict[int, tuple[str, str | None]]:
    with psycopg.connect(database_url) as db:
        found = db.execute(
            "SELECT chunk_index, state, worker_id FROM chunks WHERE operation_id = %s",
            (operation_id,),
        ).fetchall()
    return {index: (state, worker) for index, state, worker in found}


def worker_holding(workers: list[Process], worker_id: str) -> Process:
    pid = int(worker_id.split(":")[1])
    return next(worker for worker in workers if worker.popen.pid == pid)


def test_cancel_stops_every_worker_of_a_split_operation(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    database: dict[str, Any] = {"database_url": empty_postgres_url, "chunk_rows": CHUNK_ROWS}
    _, url = serve(spawn, "--role", "api", **database)
    workers = started_workers(spawn, 2, max_row_concurrency=5, **database)
    log = tmp_path / "side-effects.log"
    rows = 30 * CHUNK_ROWS  # 30 chunks of about 0.4 s each: far from done when cancelled
    operation_id = submit(url, log, rows=rows, delay_ms=20)
    wait_for(
        lambda: (
            all(chunks_processed_by(worker, operation_id) for worker in workers)
            and status_of(url, operation_id).get("processedRows", 0) >= CHUNK_ROWS
        ),
        timeout=120,
        what="both workers to hold chunks and a chunk of rows to be stored",
    )

    cancelled = httpx.post(f"{url}/api/bulks/{operation_id}/cancel")

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "Cancelled"
    held = {
        index: worker
        for index, (state, worker) in chunk_states(empty_postgres_url, operation_id).items()
        if state == "Running"
    }
    assert held, "no chunk was held when the operation was cancelled"
    # Each holder leaves its chunk on its next check. A chunk whose rows had all run before
    # the cancel (its end still being stored) ends Done instead, and one claimed just before
    # the cancel is handed back (Pending) when its worker finds the operation cancelled.
    for index, worker_id in held.items():
        holder = worker_holding(workers, str(worker_id))
        wait_for(
            lambda h=holder, i=index: (
                f"Left chunk {i} of operation {operation_id}: cancelled" in h.output()
                or chunk_states(empty_postgres_url, operation_id)[i][0] != "Running"
            ),
            timeout=30,
            what=f"chunk {index} to be left, done or handed back",
        )
    ran = sum(runs(log).values())
    for worker in workers:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0
    assert sum(runs(log).values()) == ran, "a row ran after every chunk was left"

    counts = runs(log)
    assert max(counts.values()) == 1
    assert len(counts) < rows
    states = chunk_states(empty_postgres_url, operation_id)
    assert any(state == "Pending" for state, _ in states.values()), "chunks claimed after cancel"
    final = status_of(url, operation_id)
    assert final["status"] == "Cancelled"
    assert 0 < final["processedRows"] <= len(counts)
    with psycopg.connect(empty_postgres_url) as db:
        stored = sum(1 for _, state in postgres_rows(db, operation_id) if state == "Completed")
    assert stored >= cancelled.json()["processedRows"]  # nothing recorded before is lost


def test_retry_reruns_the_failed_rows_of_every_chunk_once(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    database: dict[str, Any] = {"database_url": empty_postgres_url, "chunk_rows": CHUNK_ROWS}
    _, url = serve(spawn, "--role", "api", **database)
    workers = started_workers(spawn, 2, max_row_concurrency=5, **database)
    log, fail_file = tmp_path / "side-effects.log", tmp_path / "fail"
    rows = 8 * CHUNK_ROWS
    failing = {f"r{n}" for n in range(CHUNK_ROWS // 2, rows, CHUNK_ROWS)}  # one per chunk
    fail_file.write_text("\n".join(sorted(failing)) + "\n")
    metadata = {"log": str(log), "failFile": str(fail_file), "delayMs": 10}
    content = "name\n" + "".join(f"r{n}\n" for n in range(1, rows + 1))
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "e2e-retry", "metadata": json.dumps(metadata)},
        files={"file": ("rows.csv", content.encode(), "text/csv")},
    )
    assert response.status_code == 201, response.text
    operation_id = response.json()["operationId"]

    first = wait_terminal(url, operation_id, timeout=120)

    assert (first["status"], first["processedRows"], first["errorCount"]) == (
        "CompletedWithErrors",
        rows,
        len(failing),
    )
    assert all(chunks_processed_by(worker, operation_id) for worker in workers)
    fail_file.write_text("")  # the cause is fixed
    retried = httpx.post(f"{url}/api/bulks/{operation_id}/retry")
    assert retried.json() == {"rowsSubmitted": len(failing), "rowsSkipped": 0}

    final = wait_terminal(url, operation_id, timeout=120)

    assert (final["status"], final["processedRows"], final["errorCount"]) == (
        "Completed",
        rows,
        0,
    )
    counts = runs(log)
    assert set(counts) == {f"r{n}" for n in range(1, rows + 1)}
    assert {name for name, count in counts.items() if count == 2} == failing
    assert max(counts.values()) == 2
    history = httpx.get(f"{url}/api/bulks/{operation_id}/retry/history").json()
    assert sorted(h["rowNumber"] for h in history["items"]) == sorted(
        int(name[1:]) for name in failing
    )
    failed = httpx.get(f"{url}/api/bulks/{operation_id}/errors").json()
    assert failed["totalCount"] == 0
