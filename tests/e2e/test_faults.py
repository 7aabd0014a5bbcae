"""Faults with real processes and real databases: a killed serve, a killed worker, a database
outage, and a SQLite file locked by another process. Side effects are counted in a log the
operation appends to, so a row run twice shows."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.e2e.conftest import Process, serve, status_of, wait_for, wait_terminal
from tests.e2e.faults import TcpProxy, runs
from tests.stored_rows import final_names, postgres_rows, sqlite_rows

ROWS = 600


def submit(url: str, log: Path, rows: int = ROWS, delay_ms: int = 10) -> str:
    content = "name\n" + "".join(f"r{n}\n" for n in range(1, rows + 1))
    response = httpx.post(
        f"{url}/api/bulks",
        data={
            "operationName": "slow-log",
            "metadata": json.dumps({"log": str(log), "delayMs": delay_ms}),
        },
        files={"file": ("rows.csv", content.encode(), "text/csv")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


def reached(url: str, operation_id: str, rows: int) -> Callable[[], bool]:
    return lambda: status_of(url, operation_id).get("processedRows", 0) >= rows


def assert_each_row_ran_once_except(log: Path, rows: int, allowed: set[str]) -> set[str]:
    """Every row ran; rows outside ``allowed`` ran exactly once. Returns those run twice."""
    counts = runs(log)
    assert set(counts) == {f"r{n}" for n in range(1, rows + 1)}
    twice = {name for name, count in counts.items() if count > 1}
    assert twice <= allowed, sorted(twice - allowed)
    assert max(counts.values()) <= 2
    return twice


def report(fault: str, *, stored: int, twice: int, **since: float) -> None:
    """Print what a fault cost (shown with ``pytest -s``; the closing notes quote it)."""
    timings = ", ".join(f"{name} {time.monotonic() - at:.1f} s" for name, at in since.items())
    print(f"\nFAULT {fault}: rows stored before {stored}, run twice {twice}; {timings}")


def engine_lines(process: Process) -> str:
    """The process's output without its access log (a polling test floods it)."""
    return "\n".join(line for line in process.output().splitlines() if "uvicorn.access" not in line)


def event_messages(url: str, operation_id: str) -> list[str]:
    events = httpx.get(f"{url}/api/bulks/{operation_id}/events").json()
    return [f"{e['type']}: {e['message']}" for e in events]


def test_a_killed_serve_resumes_its_operation_when_started_again(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    # Never split (its slow rows would be cut into chunks): the operation itself is resumed.
    settings: dict[str, Any] = {"abandon_after": 2, "chunk_rows": 0}
    process, url = serve(spawn, **settings)
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log)
    wait_for(reached(url, operation_id, ROWS * 3 // 10), timeout=120, what="30% of the rows")

    process.signal(signal.SIGKILL)
    process.wait()
    stored = final_rows_of_db(tmp_path / "shared.db", operation_id)
    assert 0 < len(stored) < ROWS
    assert status_of_db(tmp_path / "shared.db", operation_id) == "Running"

    restarted = time.monotonic()
    _, url = serve(spawn, **settings)
    final = wait_terminal(url, operation_id, timeout=120)

    assert (final["status"], final["processedRows"], final["totalRows"]) == (
        "Completed",
        ROWS,
        ROWS,
    )
    # Rows stored as final before the crash never ran again.
    not_final = {f"r{n}" for n in range(1, ROWS + 1)} - stored
    twice = assert_each_row_ran_once_except(log, ROWS, not_final)
    report("killed serve", stored=len(stored), twice=len(twice), restart_to_end=restarted)
    messages = event_messages(url, operation_id)
    assert messages[0].startswith("Created") and messages[-1].startswith("Completed")
    assert any("resumed after its worker stopped responding" in m for m in messages)


def test_a_killed_serve_takes_its_row_helper_with_it(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    rows = 3000
    # The HTTP process's own helper (its worker processes' helpers end with them, and
    # they with serve: test_worker_processes).
    settings: dict[str, Any] = {
        "abandon_after": 2,
        "chunk_rows": 100,
        "row_helpers": 1,
        "worker_processes": 0,
    }
    process, url = serve(spawn, **settings)
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log, rows=rows, delay_ms=2)
    helpers: list[int] = []
    wait_for(
        lambda: bool(helpers.extend(row_helpers_of(process.popen.pid)) or helpers),
        timeout=60,
        what="a row helper process",
    )
    wait_for(reached(url, operation_id, rows // 4), timeout=120, what="a quarter of the rows")
    assert alive(helpers[0])

    process.signal(signal.SIGKILL)
    process.wait()
    wait_for(lambda: not alive(helpers[0]), timeout=30, what="the helper to exit")
    stored = final_rows_of_db(tmp_path / "shared.db", operation_id)

    restarted = time.monotonic()
    _, url = serve(spawn, **settings)
    final = wait_terminal(url, operation_id, timeout=120)

    assert (final["status"], final["processedRows"]) == ("Completed", rows)
    not_final = {f"r{n}" for n in range(1, rows + 1)} - stored
    twice = assert_each_row_ran_once_except(log, rows, not_final)
    report(
        "killed serve with a row helper",
        stored=len(stored),
        twice=len(twice),
        restart_to_end=restarted,
    )


def row_helpers_of(pid: int) -> list[int]:
    """The row helper processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        if parent == pid and b"bulkops.engine.helper_child" in command:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def final_rows_of_db(path: Path, operation_id: str) -> set[str]:
    """The names (r<number>) of the operation's rows stored Completed or Failed."""
    with sqlite3.connect(path) as db:
        return final_names(sqlite_rows(db, operation_id))


def status_of_db(path: Path, operation_id: str) -> str:
    with sqlite3.connect(path) as db:
        (status,) = db.execute(
            "SELECT status FROM operations WHERE id = ?", (operation_id,)
        ).fetchone()
    return str(status)


@pytest.mark.postgres
def test_a_killed_workers_operation_is_finished_by_another(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    # Never split (its slow rows would be cut into chunks): the operation itself is taken over.
    database: dict[str, Any] = {
        "database_url": empty_postgres_url,
        "abandon_after": 2,
        "chunk_rows": 0,
    }
    _, url = serve(spawn, "--role", "api", **database)
    workers = [spawn("worker", pending_poll_interval="0.1", **database) for _ in range(2)]
    log = tmp_path / "side-effects.log"
    operation_id = submit(url, log)
    wait_for(reached(url, operation_id, ROWS // 4), timeout=120, what="a quarter of the rows")

    with psycopg.connect(empty_postgres_url) as db:
        (holder,) = db.execute(
            "SELECT worker_id FROM operations WHERE id = %s", (operation_id,)
        ).fetchone()
    pid = int(holder.split(":")[1])
    victim = next(worker for worker in workers if worker.popen.pid == pid)
    victim.signal(signal.SIGKILL)
    victim.wait()
    with psycopg.connect(empty_postgres_url) as db:
        stored = final_names(postgres_rows(db, operation_id))

    killed = time.monotonic()
    final = wait_terminal(url, operation_id, timeout=120)

    assert (final["status"], final["processedRows"]) == ("Completed", ROWS)
    every = {f"r{n}" for n in range(1, ROWS + 1)}
    twice = assert_each_row_ran_once_except(log, ROWS, every - stored)
    report("killed worker", stored=len(stored), twice=len(twice), kill_to_end=killed)
    with psycopg.connect(empty_postgres_url) as db:
        (now_held_by,) = db.execute(
            "SELECT worker_id FROM operations WHERE id = %s", (operation_id,)
        ).fetchone()
    assert now_held_by != holder


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_a_database_outage_loses_nothing_and_reruns_nothing(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    real = make_url(empty_postgres_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxy.start()
    through_proxy = real.set(port=proxy.port).render_as_string(hide_password=False)
    try:
        process, url = serve(spawn, database_url=through_proxy)
        log = tmp_path / "side-effects.log"
        rows = 1500
        operation_id = submit(url, log, rows=rows, delay_ms=4)
        wait_for(reached(url, operation_id, 300), timeout=120, what="300 rows")

        proxy.stop()
        down_at = time.monotonic()
        answer = httpx.get(f"{url}/api/bulks/{operation_id}/status", timeout=30)
        assert answer.status_code == 503 and "error" in answer.json()
        ready = httpx.get(f"{url}/health/ready", timeout=30)
        assert ready.status_code == 503 and ready.json()["status"] == "Unhealthy"
        time.sleep(max(0.0, 8 - (time.monotonic() - down_at)))  # the outage lasts 8 s
        proxy.start()

        final = wait_terminal(url, operation_id, timeout=180, detail=lambda: engine_lines(process))
        messages = event_messages(url, operation_id)
    finally:
        proxy.stop()
    assert (final["status"], final["processedRows"]) == ("Completed", rows)
    assert_each_row_ran_once_except(log, rows, set())  # nothing ran twice
    with psycopg.connect(empty_postgres_url) as db:
        stored = len(postgres_rows(db, operation_id))
    assert stored == rows  # every row recorded once
    assert not any("resumed" in m for m in messages)  # the holder rode the outage out
    report("postgres outage 8 s", stored=stored, twice=0, outage_to_end=down_at)


def test_sqlite_locked_by_another_process_pauses_and_loses_nothing(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process, url = serve(spawn, sqlite_busy_timeout="0.3")
    log = tmp_path / "side-effects.log"
    # Rows enough that the operation is still running when the lock is taken, however
    # loaded the machine: 100 rows are seen, and 2,300 remain to store.
    rows = 2400
    operation_id = submit(url, log, rows=rows, delay_ms=4)
    wait_for(reached(url, operation_id, 100), timeout=120, what="100 rows")

    locker = sqlite3.connect(tmp_path / "shared.db", isolation_level=None, timeout=30)
    locker.execute("BEGIN IMMEDIATE")  # another process takes the write lock and keeps it
    try:
        refused = httpx.post(
            f"{url}/api/bulks",
            data={"operationName": "slow-log", "metadata": json.dumps({"log": str(log)})},
            files={"file": ("more.csv", b"name\nx\n", "text/csv")},
            timeout=30,
        )
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"] == "Storage is unavailable; try again later"
        # A row write that meets the lock logs "Storage unavailable" and retries; a claim of
        # the next chunk that meets it (the lock fell between two chunks) logs the error
        # with its traceback and is tried again at the next turn or poll.
        wait_for(
            lambda: any(
                "Storage unavailable" in line or "StorageUnavailable" in line
                for line in process.output().splitlines()
            ),
            what="processing to meet the lock and retry",
            detail=process.output,
        )
        assert status_of(url, operation_id)["status"] == "Running"  # reads still work
    finally:
        locker.execute("ROLLBACK")
        locker.close()

    final = wait_terminal(url, operation_id, timeout=120)
    assert (final["status"], final["processedRows"]) == ("Completed", rows)
    assert_each_row_ran_once_except(log, rows, set())
    report("sqlite locked", stored=final["processedRows"], twice=0)
