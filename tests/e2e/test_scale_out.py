"""One operation over several real worker processes on PostgreSQL: every row once, every
worker taking part, and a worker killed mid-chunk replaced by another."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.conftest import Process, serve, status_of, wait_for, wait_terminal
from tests.e2e.test_faults import assert_each_row_ran_once_except, submit
from tests.stored_rows import final_names, postgres_rows

pytestmark = pytest.mark.postgres

ROWS = 1200
CHUNK_ROWS = 100


def chunks_processed_by(worker: Process, operation_id: str) -> set[int]:
    found = re.findall(rf"Processing chunk (\d+) .* of operation {operation_id}", worker.output())
    return {int(index) for index in found}


@pytest.mark.parametrize("worker_count", [2, 3])
def test_every_worker_takes_chunks_and_every_row_runs_once(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str, worker_count: int
) -> None:
    database: dict[str, Any] = {"database_url": empty_postgres_url, "chunk_rows": CHUNK_ROWS}
    _, url = serve(spawn, "--role", "api", **database)
    workers = [
        spawn("worker", pending_poll_interval="0.1", max_row_concurrency="5", **database)
        for _ in range(worker_count)
    ]
    for worker in workers:  # all polling before the work arrives
        wait_for(lambda w=worker: "bulkops worker started" in w.output(), what="a worker")
    log = tmp_path / "side-effects.log"
    # A chunk takes about 0.4 s (100 rows of 20 ms, 5 at a time): every worker gets turns.
    operation_id = submit(url, log, rows=ROWS, delay_ms=20)

    def outputs() -> str:
        return "\n".join(f"--- worker {n}\n{w.output()[-1500:]}" for n, w in enumerate(workers))

    final = wait_terminal(url, operation_id, timeout=180, detail=outputs)

    assert (final["status"], final["processedRows"], final["totalRows"]) == (
        "Completed",
        ROWS,
        ROWS,
    )
    assert_each_row_ran_once_except(log, ROWS, set())
    taken = [chunks_processed_by(worker, operation_id) for worker in workers]
    assert all(taken), f"a worker took no chunk: {taken}"
    with psycopg.connect(empty_postgres_url) as db:
        states = db.execute(
            "SELECT state, count(*) FROM chunks WHERE operation_id = %s GROUP BY state",
            (operation_id,),
        ).fetchall()
    # Chunk 0 holds the first rows, run by the claimer before the split; every other chunk
    # (of at most CHUNK_ROWS rows) was claimed once.
    assert len(states) == 1 and states[0][0] == "Done" and states[0][1] >= ROWS // CHUNK_ROWS
    assert sorted(i for indexes in taken for i in indexes) == list(range(1, states[0][1]))


def test_a_chunk_of_a_killed_worker_is_finished_by_another(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    database: dict[str, Any] = {
        "database_url": empty_postgres_url,
        "chunk_rows": CHUNK_ROWS,
        "abandon_after": 2,
    }
    _, url = serve(spawn, "--role", "api", **database)
    workers = [spawn("worker", pending_poll_interval="0.1", **database) for _ in range(2)]
    for worker in workers:
        wait_for(lambda w=worker: "bulkops worker started" in w.output(), what="a worker")
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log, rows=ROWS // 2, delay_ms=10)
    wait_for(
        lambda: status_of(url, operation_id).get("processedRows", 0) >= CHUNK_ROWS // 2,
        timeout=120,
        what="half a chunk of rows",
    )

    # A chunk held now: between one chunk's end and the next claim none may be Running.
    running: list[tuple[str, int]] = []

    def a_chunk_running() -> bool:
        with psycopg.connect(empty_postgres_url) as db:
            running[:] = db.execute(
                "SELECT worker_id, chunk_index FROM chunks WHERE operation_id = %s "
                "AND state = 'Running' ORDER BY chunk_index LIMIT 1",
                (operation_id,),
            ).fetchall()
        return bool(running)

    wait_for(a_chunk_running, timeout=60, what="a chunk held by a worker")
    [(holder, index)] = running
    pid = int(holder.split(":")[1])
    victim = next(worker for worker in workers if worker.popen.pid == pid)
    victim.signal(signal.SIGKILL)
    victim.wait()
    with psycopg.connect(empty_postgres_url) as db:
        stored = final_names(postgres_rows(db, operation_id))

    final = wait_terminal(url, operation_id, timeout=120)

    rows = ROWS // 2
    assert (final["status"], final["processedRows"]) == ("Completed", rows)
    assert_each_row_ran_once_except(log, rows, {f"r{n}" for n in range(1, rows + 1)} - stored)
    survivor = next(worker for worker in workers if worker is not victim)
    assert index in chunks_processed_by(survivor, operation_id)
    assert f"Resuming chunk {index} of operation {operation_id}" in survivor.output()
