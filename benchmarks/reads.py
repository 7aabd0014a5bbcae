"""Scenarios 12 and 13: what reads cost, and many operations at once.

Scenario 12 times each read route on the run's large operation (scenario 1's, still held
by its service) and on a 1,000-row operation in the same service and database. Scenario 13
uploads 20 files at once and compares their aggregate rows/s with one upload of as many
rows, then does it again while 8 clients poll status, errors and the list.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import httpx

from benchmarks.client import TERMINAL, Run, run_to_end, upload
from benchmarks.context import Context, data_dir
from benchmarks.results import Result, at_least, at_most
from benchmarks.service import Service, ServiceError

MS = 1000.0
SMALL_ROWS = 1000
CALLS = 10


def _median_ms(client: httpx.Client, url: str) -> float:
    client.get(url).raise_for_status()  # warm-up
    times = []
    for _ in range(CALLS):
        started = time.perf_counter()
        client.get(url).raise_for_status()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2] * MS


def _routes(operation_id: str, rows: int) -> dict[str, str]:
    last = max(1, math.ceil(rows / 25))
    base = f"/api/bulks/{operation_id}"
    return {
        "status": f"{base}/status",
        "errors": f"{base}/errors",
        "rows_failed": f"{base}/rows?state=Failed",
        "rows_last_page": f"{base}/rows?page={last}",
        "rows_completed_last_page": f"{base}/rows?state=Completed&page={last}",
        "rows_after_cursor": f"{base}/rows?after={max(0, rows - 25)}",
        "rows_step_last_page": f"{base}/rows?stepName=process&page={last}",
        "rows_step_none": f"{base}/rows?stepName=validation",
        "events": f"{base}/events",
        "list": "/api/bulks",
    }


def read_latency(context: Context) -> Result:
    """Scenario 12: median latency of each read route, large operation against small."""
    big_run = context.plain_run(context.inputs.csv)
    service = context.plain_run_service(context.inputs.csv)
    small_run = run_to_end(service, context.csv_of(SMALL_ROWS))
    result = Result(
        figures={
            "large_rows": big_run.rows,
            "small_rows": small_run.rows,
            "calls_per_route": CALLS,
        }
    )
    compare_routes(service, big_run, small_run, result)
    result.notes.append(
        "Median of 10 calls after a warm-up, one keep-alive connection; the large operation is "
        "scenario 1's, in the same service and database as the small one."
    )
    return result


def compare_routes(
    service: Service, big_run: Run, small_run: Run, result: Result, *, label: str = ""
) -> None:
    """Time every read route on a large and a small operation of one service, adding the
    figures and the checks (within 20 ms, within 3x) to ``result``."""
    figures = result.figures
    with httpx.Client(base_url=service.url, timeout=60) as client:
        large = _routes(big_run.operation_id, big_run.rows)
        small = _routes(small_run.operation_id, small_run.rows)
        for name in large:
            big_ms, small_ms = _median_ms(client, large[name]), _median_ms(client, small[name])
            figures[f"{label}{name}_large_ms"] = round(big_ms, 2)
            figures[f"{label}{name}_small_ms"] = round(small_ms, 2)
            title = f"{label.replace('_', ' ')}{name}"
            result.checks.append(at_most(f"{title} on the large operation", big_ms, 20, "ms"))
            ratio = big_ms / max(small_ms, 0.5)
            result.ratios[f"{label}{name}_large_vs_small"] = ratio
            result.checks.append(at_most(f"{title} large vs small", ratio, 3, "x"))


def _upload_all(url: str, paths: list[Path]) -> list[str]:
    with httpx.Client(timeout=300) as client, ThreadPoolExecutor(len(paths)) as pool:
        return list(pool.map(lambda path: upload(client, url, path), paths))


def _wait_all(url: str, ids: list[str], timeout: float = 900) -> int:
    deadline = time.perf_counter() + timeout
    rows = 0
    with httpx.Client(timeout=60) as client:
        for operation_id in ids:
            while True:
                status = client.get(f"{url}/api/bulks/{operation_id}/status").json()
                if status["status"] in TERMINAL:
                    if status["status"] != "Completed":
                        raise ServiceError(f"{operation_id} ended {status}")
                    rows += int(status["processedRows"])
                    break
                if time.perf_counter() > deadline:
                    raise ServiceError(f"{operation_id} not finished: {status}")
                time.sleep(0.05)
    return rows


class _Readers(threading.Thread):
    """Clients polling status, errors and the list of the running operations: aiohttp
    sessions of one connection each, on an event loop of their own (an httpx client's own
    work per request, in threads, took the benchmark's CPU from the service it measures)."""

    def __init__(self, url: str, ids: list[str], clients: int, pause: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.url, self.ids, self.clients = url, ids, clients
        self.pause = pause  # seconds between a client's reads (0: a closed loop)
        self.latencies: list[float] = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        asyncio.run(self._read_all())

    async def _read_all(self) -> None:
        await asyncio.gather(*(self._poll(index) for index in range(self.clients)))

    async def _poll(self, index: int) -> None:
        operation = self.ids[index % len(self.ids)]
        paths = [f"/api/bulks/{operation}/status", f"/api/bulks/{operation}/errors", "/api/bulks"]
        timeout = aiohttp.ClientTimeout(total=60)
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(self.url, timeout=timeout, connector=connector) as client:
            turn = 0
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    async with client.get(paths[turn % 3]) as response:
                        await response.read()
                        ok = response.status == 200
                except aiohttp.ClientError:
                    ok = False
                if ok:
                    self.latencies.append(time.perf_counter() - started)
                else:
                    self.errors += 1
                turn += 1
                await asyncio.sleep(self.pause)  # 0: lets the other clients' answers in

    def ms(self, percent: float) -> float:
        ordered = sorted(self.latencies) or [0.0]
        return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1] * MS


def _concurrent(
    context: Context, files: int, rows: int, readers: int, pause: float = 0.1
) -> tuple[float, _Readers]:
    """Aggregate rows/s of ``files`` uploads of ``rows`` rows at once, with ``readers``
    clients reading meanwhile (``pause`` seconds between reads; 0: closed loops)."""
    path = context.csv_of(rows)
    with data_dir() as directory, Service(directory) as service:
        started = time.perf_counter()
        ids = _upload_all(service.url, [path] * files)
        polling = _Readers(service.url, ids, readers, pause)
        if readers:
            polling.start()
        done = _wait_all(service.url, ids)
        seconds = time.perf_counter() - started
        polling.stop.set()
        if readers:
            polling.join(60)
    if done != files * rows:
        raise ServiceError(f"expected {files * rows} rows, processed {done}")
    return done / seconds, polling


def concurrent_uploads(context: Context) -> Result:
    """Scenario 13: 20 uploads at once against one upload of as many rows, and with 8
    polling clients."""
    quick = context.sizes.name == "quick"
    files, rows = (10, 2000) if quick else (20, 20000)
    single_path = context.csv_of(files * rows)
    with data_dir() as directory, Service(directory) as service:
        single = run_to_end(service, single_path)
    together, _ = _concurrent(context, files, rows, 0)
    polled, readers = _concurrent(context, files, rows, 8)
    result = Result(
        figures={
            "uploads": files,
            "rows_each": rows,
            "single_upload_rows_per_s": round(single.rows_per_second, 1),
            "together_rows_per_s": round(together, 1),
            "together_with_readers_rows_per_s": round(polled, 1),
            "reader_clients": 8,
            "reads": len(readers.latencies),
            "read_errors": readers.errors,
            "read_p50_ms": round(readers.ms(50), 2),
            "read_p99_ms": round(readers.ms(99), 2),
        },
        notes=["Aggregate rows/s from the first upload's start to the last operation's end."],
    )
    result.ratios["together_vs_single"] = together / single.rows_per_second
    result.ratios["with_readers_vs_without"] = polled / together
    result.checks.append(
        at_least("uploads at once vs one upload", result.ratios["together_vs_single"], 0.8, "x")
    )
    result.checks.append(
        at_least("with 8 readers vs none", result.ratios["with_readers_vs_without"], 0.5, "x")
    )
    result.checks.append(at_most("read errors", readers.errors, 0))
    return result
