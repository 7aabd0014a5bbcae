"""Scenarios 19-22 (issue 24): a service shared by many people, at default settings.

19: a 10-row import behind a backlog of 8 imports of 2,000 rows that call another service
(10 ms a row), against the same import on a quiet service. 20: a second tenant's import
beside a first tenant's 6, its share of the rows over a few seconds. 21: one operation of
slow rows (6,000, 12,000 and 30,000 rows of 20 ms, 10 at a time) on one, two and four worker
processes on PostgreSQL, at the default chunk size. 22: 20 uploads at once with and without
8 clients reading status, errors and the list in closed loops.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from benchmarks.client import TERMINAL
from benchmarks.context import Context, data_dir
from benchmarks.operations import BENCH_CALL, BENCH_WAIT
from benchmarks.reads import _concurrent
from benchmarks.results import Result, at_least, at_most
from benchmarks.scaleout import WAIT_CONCURRENCY, _cluster_run
from benchmarks.service import Service, ServiceError

BACKLOG, BACKLOG_ROWS, SMALL_ROWS = 8, 2000, 10
ALICE_IMPORTS, WINDOW_S = 6, 4.0
MS = 1000.0
# Scenario 21: operation sizes, worker counts and the least speed-up against one worker.
SLOW_SIZES, SLOW_SIZES_QUICK = (6000, 12000, 30000), (1500,)
SLOW_WORKERS = (1, 2, 4)
SLOW_TARGETS = {2: 1.8, 4: 3.4}


def _create(client: httpx.Client, url: str, path: Path, created_by: str) -> str:
    with path.open("rb") as fh:
        response = client.post(
            f"{url}/api/bulks",
            data={"operationName": BENCH_CALL, "metadata": "{}", "createdBy": created_by},
            files={"file": (path.name, fh, "text/csv")},
        )
    if response.status_code != 201:
        raise ServiceError(f"create answered {response.status_code}: {response.text[:300]}")
    return str(response.json()["operationId"])


def _status(client: httpx.Client, url: str, operation_id: str) -> dict[str, object]:
    body: dict[str, object] = client.get(f"{url}/api/bulks/{operation_id}/status").json()
    return body


def _processed(client: httpx.Client, url: str, operation_id: str) -> int:
    return int(str(_status(client, url, operation_id).get("processedRows", 0)))


def _until_done(client: httpx.Client, url: str, operation_id: str, timeout: float = 600) -> float:
    """Seconds until the operation ends Completed (polled every 20 ms)."""
    started = time.perf_counter()
    while True:
        status = _status(client, url, operation_id)
        if status.get("status") in TERMINAL:
            if status.get("status") != "Completed":
                raise ServiceError(f"{operation_id} ended {status}")
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise ServiceError(f"{operation_id} not finished: {status}")
        time.sleep(0.02)


def _cancel(client: httpx.Client, url: str, ids: list[str]) -> None:
    for operation_id in ids:  # the service then stops without draining them
        client.post(f"{url}/api/bulks/{operation_id}/cancel")


def _small_alone(context: Context) -> float:
    with data_dir() as directory, Service(directory) as service, httpx.Client(timeout=60) as c:
        operation_id = _create(c, service.url, context.csv_of(SMALL_ROWS), "carol")
        return _until_done(c, service.url, operation_id)


def small_behind_backlog(context: Context) -> Result:
    """Scenario 19: a 10-row import behind 8 imports of 2,000 rows of 10 ms."""
    alone = _small_alone(context)
    big = context.csv_of(BACKLOG_ROWS)
    with data_dir() as directory, Service(directory) as service, httpx.Client(timeout=60) as c:
        url = service.url
        backlog = [_create(c, url, big, "alice") for _ in range(BACKLOG)]
        while sum(_processed(c, url, i) > 0 for i in backlog) < min(BACKLOG, 4):
            time.sleep(0.05)  # the backlog is running
        small = _create(c, url, context.csv_of(SMALL_ROWS), "carol")
        behind = _until_done(c, url, small)
        _cancel(c, url, backlog)
    limit = max(2.0, 10 * alone)
    result = Result(
        figures={
            "backlog_imports": BACKLOG,
            "backlog_rows_each": BACKLOG_ROWS,
            "small_rows": SMALL_ROWS,
            "small_alone_s": round(alone, 3),
            "small_behind_backlog_s": round(behind, 3),
        },
        notes=["Combined serve, SQLite, default settings; time from create to Completed."],
    )
    result.ratios["behind_vs_alone"] = behind / alone
    result.checks.append(at_most("10-row import behind the backlog", behind, limit, "s"))
    return result


def second_tenant(context: Context) -> Result:
    """Scenario 20: bob's one import beside alice's 6, bob's share of the rows."""
    big = context.csv_of(BACKLOG_ROWS * 2)
    with data_dir() as directory, Service(directory) as service, httpx.Client(timeout=60) as c:
        url = service.url
        alice = [_create(c, url, big, "alice") for _ in range(ALICE_IMPORTS)]
        while not any(_processed(c, url, i) for i in alice):
            time.sleep(0.05)
        bob = _create(c, url, big, "bob")
        while not _processed(c, url, bob):
            time.sleep(0.02)
        alice_before = sum(_processed(c, url, i) for i in alice)
        bob_before = _processed(c, url, bob)
        time.sleep(WINDOW_S)  # the measurement window
        alice_rows = sum(_processed(c, url, i) for i in alice) - alice_before
        bob_rows = _processed(c, url, bob) - bob_before
        _cancel(c, url, [*alice, bob])
    total = alice_rows + bob_rows
    share = bob_rows / total if total else 0.0
    result = Result(
        figures={
            "alice_imports": ALICE_IMPORTS,
            "window_s": WINDOW_S,
            "alice_rows": alice_rows,
            "bob_rows": bob_rows,
            "bob_share": round(share, 3),
        },
        notes=["Rows processed in a window that starts once bob's first rows are stored."],
    )
    result.ratios["bob_share"] = share
    result.checks.append(at_least("second tenant's share of the rows", share, 0.35, "x"))
    return result


def slow_split_default(context: Context) -> Result:
    """Scenario 21: one operation of 20 ms rows on 1, 2 and 4 workers, at three sizes,
    default chunk size."""
    quick = context.sizes.name == "quick"
    sizes = SLOW_SIZES_QUICK if quick else SLOW_SIZES
    figures: dict[str, object] = {"max_row_concurrency_per_worker": WAIT_CONCURRENCY}
    result = Result(
        figures=figures,
        notes=[
            "As scenario 10, but BULKOPS_CHUNK_ROWS left at its default (10,000): every "
            "operation is cut into chunks at the pace of its first rows, whatever its size.",
        ],
    )
    for rows in sizes:
        path = context.csv_of(rows)
        runs = {
            n: _cluster_run(path, n, BENCH_WAIT, concurrency=WAIT_CONCURRENCY, chunk_rows=None)
            for n in SLOW_WORKERS
        }
        for run in runs.values():
            if run.status.get("status") != "Completed" or run.rows != rows:
                raise ServiceError(f"expected {rows} rows Completed, got {run.status}")
        for n, run in runs.items():
            figures[f"rows_{rows}_workers_{n}_wall_s"] = round(run.wall_seconds, 3)
        one = runs[1].wall_seconds
        for n, least in SLOW_TARGETS.items():
            ratio = one / runs[n].wall_seconds
            result.ratios[f"rows_{rows}_workers_{n}_vs_one"] = ratio
            result.checks.append(at_least(f"{rows} rows, {n} workers vs one", ratio, least, "x"))
    return result


def closed_loop_readers(context: Context) -> Result:
    """Scenario 22: 20 uploads at once, quiet and with 8 closed-loop readers."""
    quick = context.sizes.name == "quick"
    files, rows = (10, 2000) if quick else (20, 20000)
    quiet, _ = _concurrent(context, files, rows, 0)
    busy, readers = _concurrent(context, files, rows, 8, pause=0.0)
    reads_per_s = len(readers.latencies) / max(1e-9, files * rows / busy)
    result = Result(
        figures={
            "uploads": files,
            "rows_each": rows,
            "quiet_rows_per_s": round(quiet, 1),
            "with_readers_rows_per_s": round(busy, 1),
            "reads": len(readers.latencies),
            "reads_per_s": round(reads_per_s, 1),
            "read_errors": readers.errors,
            "read_p50_ms": round(readers.ms(50), 2),
            "read_p99_ms": round(readers.ms(99), 2),
        },
        notes=["8 clients read status, errors and the list in turn, each in a closed loop."],
    )
    result.ratios["with_readers_vs_quiet"] = busy / quiet
    result.checks.append(at_least("processing with 8 readers vs quiet", busy / quiet, 0.8, "x"))
    result.checks.append(at_most("read p99", readers.ms(99), 50, "ms"))
    result.checks.append(at_most("read errors", readers.errors, 0))
    return result
