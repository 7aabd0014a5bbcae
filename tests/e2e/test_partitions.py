"""A partition between a process and PostgreSQL that drops packets without a reset: the
proxy in between stops forwarding and closes nothing. Requests answer 503 within about
``BULKOPS_STORAGE_TIMEOUT`` instead of hanging, processing holds its rows, and after the
partition the operation ends with nothing lost.

A proxy on the same host cannot drop the packets themselves: its kernel still
acknowledges what the process sends, so TCP keepalives and ``tcp_user_timeout`` (which
cut a real partition) never fire here, and the limit on each transaction does the work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.e2e.conftest import Process, serve, wait_for, wait_terminal
from tests.e2e.faults import TcpProxy
from tests.e2e.test_faults import assert_each_row_ran_once_except, reached, report, submit
from tests.stored_rows import postgres_rows

TIMEOUT = 2.0  # BULKOPS_STORAGE_TIMEOUT of the processes here


def timed_get(url: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = httpx.get(url, timeout=60)
    return response, time.monotonic() - started


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_a_silent_partition_answers_503_in_time_and_loses_nothing(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    real = make_url(empty_postgres_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxy.start()
    through_proxy = real.set(port=proxy.port).render_as_string(hide_password=False)
    try:
        _, url = serve(spawn, database_url=through_proxy, storage_timeout=str(TIMEOUT))
        log = tmp_path / "side-effects.log"
        rows = 1500
        operation_id = submit(url, log, rows=rows, delay_ms=4)
        wait_for(reached(url, operation_id, 300), timeout=120, what="300 rows")

        proxy.blackhole()
        cut_at = time.monotonic()
        answer, took = timed_get(f"{url}/api/bulks/{operation_id}/status")
        assert answer.status_code == 503 and "error" in answer.json()
        # Waiting for a pooled connection, checking it, then the statement: a few limits.
        assert took < 4 * TIMEOUT + 2, took
        ready, ready_took = timed_get(f"{url}/health/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "Unhealthy"
        assert ready_took < 4 * TIMEOUT + 2, ready_took
        time.sleep(max(0.0, 10 - (time.monotonic() - cut_at)))  # the partition lasts 10 s
        proxy.heal()
        healed_at = time.monotonic()

        wait_for(
            lambda: httpx.get(f"{url}/health/ready", timeout=60).status_code == 200,
            timeout=60,
            what="ready again",
        )
        ready_again = time.monotonic() - healed_at
        final = wait_terminal(url, operation_id, timeout=180)
    finally:
        proxy.stop()
    assert (final["status"], final["processedRows"]) == ("Completed", rows)
    twice = assert_each_row_ran_once_except(log, rows, {f"r{n}" for n in range(1, rows + 1)})
    with psycopg.connect(empty_postgres_url) as db:
        stored = len(postgres_rows(db, operation_id))
    assert stored == rows  # every row recorded once
    print(f"\nPARTITION status 503 in {took:.1f} s, ready in {ready_took:.1f} s; ", end="")
    print(f"ready again {ready_again:.1f} s after healing")
    report("silent partition 10 s", stored=stored, twice=len(twice), partition_to_end=cut_at)


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_a_partitioned_workers_work_is_resumed_elsewhere(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    real = make_url(empty_postgres_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxy.start()
    through_proxy = real.set(port=proxy.port).render_as_string(hide_password=False)
    common = {"storage_timeout": str(TIMEOUT), "abandon_after": "3", "chunk_rows": "0"}
    try:
        _, url = serve(spawn, database_url=empty_postgres_url, role="api", **common)
        cut_off = spawn("worker", database_url=through_proxy, **common)
        log = tmp_path / "side-effects.log"
        rows = 3000
        operation_id = submit(url, log, rows=rows, delay_ms=20)
        wait_for(reached(url, operation_id, 300), timeout=120, what="300 rows")

        # The server ends the partitioned worker's sessions after its keepalives (here the
        # proxy closes them after the time they take), freeing its liveness lock.
        proxy.blackhole(server_gives_up=TIMEOUT)
        cut_at = time.monotonic()
        spawn("worker", database_url=empty_postgres_url, **common)
        final = wait_terminal(url, operation_id, timeout=180)
        done_in = time.monotonic() - cut_at
        proxy.heal()  # the partitioned worker comes back to find its work taken
        wait_for(lambda: cut_off.popen.poll() is None, timeout=5, what="the worker alive")
    finally:
        proxy.stop()
    assert (final["status"], final["processedRows"]) == ("Completed", rows)
    # Only what the partitioned worker had in flight may have run twice.
    twice = assert_each_row_ran_once_except(log, rows, {f"r{n}" for n in range(1, rows + 1)})
    # The write in flight and the rows behind it (its 4 x 10 row slots each at most), and
    # the rows running.
    assert len(twice) <= 2 * 4 * 10 + 10, len(twice)
    with psycopg.connect(empty_postgres_url) as db:
        stored = len(postgres_rows(db, operation_id))
        messages = [
            message
            for (message,) in db.execute(
                "SELECT message FROM events WHERE operation_id = %s", (operation_id,)
            ).fetchall()
        ]
    assert stored == rows
    assert any("resumed" in message for message in messages), messages
    report("partitioned worker", stored=stored, twice=len(twice), partition_to_end=cut_at)
    print(f"PARTITIONED WORKER done {done_in:.1f} s after the partition began")
