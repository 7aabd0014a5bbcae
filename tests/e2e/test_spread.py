"""A small operation of slow rows spreads over two worker processes on PostgreSQL at the
default chunk size: chunks are cut at the pace of its first rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.e2e.conftest import Process, serve, wait_for, wait_terminal
from tests.e2e.test_faults import assert_each_row_ran_once_except, submit

pytestmark = pytest.mark.postgres

ROWS = 3000  # far below BULKOPS_CHUNK_ROWS (10,000): it used to run on one worker


def chunks_processed_by(worker: Process, operation_id: str) -> set[int]:
    found = re.findall(rf"Processing chunk (\d+) .* of operation {operation_id}", worker.output())
    return {int(index) for index in found}


def test_a_slow_small_operation_is_split_over_two_workers(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    _, url = serve(spawn, "--role", "api", database_url=empty_postgres_url)
    workers = [
        spawn("worker", database_url=empty_postgres_url, max_row_concurrency="10") for _ in range(2)
    ]
    for worker in workers:
        wait_for(lambda w=worker: "bulkops worker started" in w.output(), what="a worker")
    log = tmp_path / "side-effects.log"
    # 3,000 rows of 20 ms, 10 at a time: 6 s on one worker, well over a few seconds.
    operation_id = submit(url, log, rows=ROWS, delay_ms=20)

    final = wait_terminal(url, operation_id, timeout=120)

    assert (final["status"], final["processedRows"]) == ("Completed", ROWS)
    assert_each_row_ran_once_except(log, ROWS, set())
    taken = [chunks_processed_by(worker, operation_id) for worker in workers]
    assert all(taken), f"a worker took no chunk: {taken}"
    with psycopg.connect(empty_postgres_url) as db:
        (chunks,) = db.execute(
            "SELECT count(*) FROM chunks WHERE operation_id = %s AND state = 'Done'",
            (operation_id,),
        ).fetchone()
    assert chunks >= 3
