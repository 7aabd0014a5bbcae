"""A restarted process resumes the work of a dead one at once where its death is certain:
PostgreSQL released the dead process's liveness lock, or on one SQLite host its process id
no longer runs. The abandon age is set far beyond the test's deadlines, so a resume that
waited for the heartbeat to age would time the test out. The other way round, a process
known alive (its lock held, its process id running) keeps its work while it is paused past
the abandon age, as a loaded machine delays its heartbeats."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bulkops.storage.sql.liveness import LOCK_SPACE
from tests.e2e.conftest import Process, serve, wait_for, wait_terminal
from tests.e2e.test_faults import ROWS, assert_each_row_ran_once_except, reached, submit

ABANDON_AFTER = 600  # a heartbeat-based resume would come ten minutes after the kill
DEADLINE = 120  # the rest of the rows take seconds


def _kill_and_restart(spawn: Callable[..., Process], tmp_path: Path, **settings: Any) -> None:
    process, url = serve(spawn, abandon_after=ABANDON_AFTER, **settings)
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log)
    wait_for(reached(url, operation_id, ROWS * 3 // 10), timeout=120, what="30% of the rows")
    process.signal(signal.SIGKILL)
    process.wait()

    killed = time.monotonic()
    _, url = serve(spawn, abandon_after=ABANDON_AFTER, **settings)
    final = wait_terminal(url, operation_id, timeout=DEADLINE)

    assert time.monotonic() - killed < ABANDON_AFTER
    assert (final["status"], final["processedRows"]) == ("Completed", ROWS)
    every = {f"r{n}" for n in range(1, ROWS + 1)}
    twice = assert_each_row_ran_once_except(log, ROWS, every)
    # At most the rows running (MaxRowConcurrency 10) and those that finished during the
    # write in flight and behind it: a round of 10 each while a write is quicker than a row.
    assert len(twice) <= 3 * 10
    print(f"\nresumed {time.monotonic() - killed:.1f} s after the kill; {len(twice)} twice")


def test_a_restarted_serve_on_sqlite_resumes_a_dead_processs_work_at_once(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _kill_and_restart(spawn, tmp_path, max_row_concurrency=10)


@pytest.mark.postgres
def test_a_restarted_serve_on_postgres_resumes_a_dead_processs_work_at_once(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    _kill_and_restart(spawn, tmp_path, max_row_concurrency=10, database_url=empty_postgres_url)


@pytest.mark.postgres
def test_a_worker_whose_connections_were_cut_keeps_its_work(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    # Its liveness lock goes with its session and comes back with the next one: nobody
    # takes its operation over meanwhile, so no row runs twice.
    database: dict[str, Any] = {"database_url": empty_postgres_url, "abandon_after": 600}
    _, url = serve(spawn, "--role", "api", **database)
    spawn("worker", pending_poll_interval="0.1", max_row_concurrency=10, **database)
    spawn("worker", pending_poll_interval="0.1", max_row_concurrency=10, **database)
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log)
    wait_for(reached(url, operation_id, ROWS // 5), timeout=120, what="a fifth of the rows")
    name = empty_postgres_url.rsplit("/", 1)[1]

    def liveness_locks() -> int:
        with psycopg.connect(empty_postgres_url) as db:
            (count,) = db.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
                "AND database = (SELECT oid FROM pg_database WHERE datname = %s)",
                (LOCK_SPACE, name),
            ).fetchone() or (0,)
        return int(count)

    wait_for(lambda: liveness_locks() == 2, what="both workers' liveness locks")
    for _ in range(3):
        with psycopg.connect(empty_postgres_url, autocommit=True) as db:
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        wait_for(lambda: liveness_locks() == 2, what="the liveness locks taken again")

    final = wait_terminal(url, operation_id, timeout=DEADLINE)
    assert (final["status"], final["processedRows"]) == ("Completed", ROWS)
    assert_each_row_ran_once_except(log, ROWS, set())


PAUSE = 6.0  # seconds a worker is stopped: three abandon ages, within its patience


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_worker_paused_past_the_abandon_age_keeps_its_work(
    spawn: Callable[..., Process], tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    # A stopped process (SIGSTOP) stands for one the machine's load holds back: its
    # heartbeat ages past BULKOPS_ABANDON_AFTER, but its lock, or its process id, says it
    # is alive, so the other worker leaves its operation to it and no row runs twice.
    database: dict[str, Any] = {"abandon_after": 2}
    if kind == "postgres":
        database["database_url"] = request.getfixturevalue("empty_postgres_url")
    _, url = serve(spawn, "--role", "api", **database)
    workers = [
        spawn("worker", pending_poll_interval="0.1", max_row_concurrency=10, **database)
        for _ in range(2)
    ]
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log, delay_ms=50)
    wait_for(reached(url, operation_id, ROWS // 5), timeout=120, what="a fifth of the rows")
    if kind == "postgres":
        wait_for(lambda: _liveness_locks(database["database_url"]) == 2, what="both locks")
    url_of = database.get("database_url")
    wait_for(lambda: bool(_holders(tmp_path, url_of, operation_id)[0]), what="a holder")
    holder = min(_holders(tmp_path, url_of, operation_id)[0])
    pid = int(holder.split(":")[1])  # worker ids are host:pid:...
    paused = next(worker for worker in workers if worker.popen.pid == pid)

    paused.signal(signal.SIGSTOP)
    try:
        time.sleep(PAUSE)  # the fault: the holder runs nothing, its heartbeat ages
    finally:
        paused.signal(signal.SIGCONT)

    final = wait_terminal(url, operation_id, timeout=DEADLINE)
    assert (final["status"], final["processedRows"]) == ("Completed", ROWS)
    assert _holders(tmp_path, url_of, operation_id)[1] == 0  # nothing was taken over
    assert_each_row_ran_once_except(log, ROWS, set())


def _liveness_locks(database_url: str) -> int:
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND database = (SELECT oid FROM pg_database WHERE datname = %s)",
            (LOCK_SPACE, name),
        ).fetchone() or (0,)
    return int(count)


_HOLDERS = """
SELECT CASE WHEN status = 'Running' THEN worker_id END, resume_count FROM operations
WHERE id = {id}
UNION ALL SELECT worker_id, resume_count FROM chunks WHERE operation_id = {id}
"""


def _holders(tmp_path: Path, database_url: str | None, operation_id: str) -> tuple[set[str], int]:
    """The workers holding the operation or a chunk of it, and how often they were resumed."""
    if database_url is None:
        with sqlite3.connect(tmp_path / "shared.db") as lite:
            rows = lite.execute(_HOLDERS.format(id="?"), (operation_id, operation_id)).fetchall()
    else:
        with psycopg.connect(database_url) as db:
            rows = db.execute(_HOLDERS.format(id="%s"), (operation_id, operation_id)).fetchall()
    return {str(worker) for worker, _ in rows if worker}, sum(int(count) for _, count in rows)
