"""Scenarios 10 and 11: PostgreSQL, with an API process and separate worker processes.

Scenario 10 runs one operation of rows that each wait 20 ms (MaxRowConcurrency 10 per
worker) with one, two and three ``bulkops worker`` processes; scenario 11 a no-op import of
the run's CSV file with one worker, against the bare loop. Each measurement gets a fresh
PostgreSQL database (created on the server of ``BULKOPS_BENCH_POSTGRES_URL``, else
``BULKOPS_TEST_POSTGRES_URL``, else the local one, and dropped afterwards) and a fresh
file directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg

from benchmarks.client import Run, run_to_end
from benchmarks.context import Context, data_dir
from benchmarks.operations import BENCH_ROWS, BENCH_WAIT
from benchmarks.reads import SMALL_ROWS, compare_routes
from benchmarks.results import Result, at_least
from benchmarks.service import READY_TIMEOUT, ROOT, Service, ServiceError

ADMIN_URL = (
    os.environ.get("BULKOPS_BENCH_POSTGRES_URL")
    or os.environ.get("BULKOPS_TEST_POSTGRES_URL")
    or "postgresql://postgres@127.0.0.1:5432/postgres"
)
WAIT_CONCURRENCY = 10
MB = 1024 * 1024


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database on the benchmark's PostgreSQL server, dropped afterwards."""
    name = f"bulkops_bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        raise ServiceError(f"PostgreSQL at {ADMIN_URL} is not reachable: {exc}") from exc
    base, _, _ = ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _Process(Service):
    """A bulkops process on a shared PostgreSQL database and a shared file directory."""

    def __init__(
        self,
        directory: Path,
        files: Path,
        database_url: str,
        *,
        role: str,
        max_row_concurrency: int = 1,
        chunk_rows: int | None = None,
    ) -> None:
        command = [sys.executable, "-m", "bulkops", "serve" if role == "api" else "worker"]
        super().__init__(directory, max_row_concurrency=max_row_concurrency, command=command)
        self._env["BULKOPS_DATABASE_URL"] = database_url
        self._env["BULKOPS_FILES_URL"] = f"file://{files}"
        self._role = role
        if role == "api":
            self._env["BULKOPS_ROLE"] = "api"
        else:
            self._env["BULKOPS_PENDING_POLL_INTERVAL"] = "0.1"
        if chunk_rows is not None:
            self._env["BULKOPS_CHUNK_ROWS"] = str(chunk_rows)

    def start(self) -> None:
        """Start; a worker serves no HTTP, so it is ready once it says it started."""
        if self._role == "api":
            super().start()
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("wb") as log:
            self._popen = subprocess.Popen(
                self._command, cwd=ROOT, env=self._env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while "bulkops worker started" not in self.log_tail():
            if self._popen.poll() is not None or time.monotonic() > deadline:
                raise ServiceError(f"worker did not start:\n{self.log_tail()}")
            time.sleep(0.05)


def _cluster_run(
    path: Path,
    workers: int,
    operation: str,
    *,
    concurrency: int,
    chunk_rows: int | None,
    after: Callable[[Service, Run], None] | None = None,
) -> Run:
    """One operation through an API process and ``workers`` worker processes; ``after``
    runs with the API process and the finished run before the processes stop."""
    with ExitStack() as stack:
        database = stack.enter_context(postgres_database())
        files = stack.enter_context(data_dir())
        api = stack.enter_context(
            _Process(stack.enter_context(data_dir()), files, database, role="api")
        )
        for _ in range(workers):
            stack.enter_context(
                _Process(
                    stack.enter_context(data_dir()),
                    files,
                    database,
                    role="worker",
                    max_row_concurrency=concurrency,
                    chunk_rows=chunk_rows,
                )
            )
        run = run_to_end(api, path, operation=operation)
        if after is not None:
            after(api, run)
        return run


def worker_speedup(context: Context) -> Result:
    """Scenario 10: one operation of waiting rows with 1, 2 and 3 workers."""
    rows = 800 if context.sizes.name == "quick" else 4000
    chunk_rows = rows // 16
    path = context.csv_of(rows)
    runs = {
        n: _cluster_run(path, n, BENCH_WAIT, concurrency=WAIT_CONCURRENCY, chunk_rows=chunk_rows)
        for n in (1, 2, 3)
    }
    for run in runs.values():
        if run.status.get("status") != "Completed" or run.rows != rows:
            raise ServiceError(f"expected {rows} rows Completed, got {run.status}")
    one = runs[1].wall_seconds
    result = Result(
        figures={
            "rows": rows,
            "chunk_rows": chunk_rows,
            "max_row_concurrency_per_worker": WAIT_CONCURRENCY,
            **{f"workers_{n}_wall_s": round(run.wall_seconds, 3) for n, run in runs.items()},
            **{f"workers_{n}_rows_per_s": round(run.rows_per_second, 1) for n, run in runs.items()},
            "ideal_one_worker_s": round(rows * 0.02 / WAIT_CONCURRENCY, 3),
        },
        notes=[
            "Wall time from upload start to final status, seen by a client polling the API "
            "process; each worker is a separate `bulkops worker` process.",
        ],
    )
    result.ratios["two_workers_vs_one"] = one / runs[2].wall_seconds
    result.ratios["three_workers_vs_one"] = one / runs[3].wall_seconds
    result.checks.append(
        at_least("two workers vs one", result.ratios["two_workers_vs_one"], 1.7, "x")
    )
    return result


def postgres_throughput(context: Context) -> Result:
    """Scenario 11: the run's CSV file, no-op rows, on PostgreSQL with one worker; then the
    read routes of scenario 12 on that operation and on a 1,000-row one, on PostgreSQL."""
    path = context.inputs.csv
    reference = context.reference(path)
    result = Result(
        notes=[
            "API process and one worker process on PostgreSQL; wall time as scenario 1.",
            "Read routes: as scenario 12, through the API process on PostgreSQL.",
        ]
    )

    def time_reads(api: Service, run: Run) -> None:
        small = run_to_end(api, context.csv_of(SMALL_ROWS), operation=BENCH_ROWS)
        compare_routes(api, run, small, result, label="postgres_")

    run = _cluster_run(path, 1, BENCH_ROWS, concurrency=1, chunk_rows=None, after=time_reads)
    if run.status.get("status") != "Completed" or run.rows != context.sizes.rows:
        raise ServiceError(f"expected {context.sizes.rows} rows Completed, got {run.status}")
    ratio = run.rows_per_second / reference.rows_per_second
    result.figures = {
        "rows": run.rows,
        "wall_s": round(run.wall_seconds, 3),
        "upload_s": round(run.upload_seconds, 3),
        "rows_per_s": round(run.rows_per_second, 1),
        "reference_rows_per_s": round(reference.rows_per_second, 1),
        **result.figures,
    }
    result.ratios["throughput_vs_reference"] = ratio
    result.checks.insert(0, at_least("throughput vs reference", ratio, 0.7, "x"))
    return result
