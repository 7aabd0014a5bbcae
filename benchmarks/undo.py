"""Scenario 23: undo of a finished 100,000-row operation beside its forward run."""

from __future__ import annotations

import time
from typing import Any

import httpx

from benchmarks.client import POLL_INTERVAL, RUN_TIMEOUT, run_to_end
from benchmarks.context import Context, data_dir
from benchmarks.operations import BENCH_UNDO
from benchmarks.procfs import MB
from benchmarks.results import Result, at_least
from benchmarks.service import Service, ServiceError

FULL_ROWS = 100_000
QUICK_ROWS = 5_000
TERMINAL = {"Completed", "CompletedWithErrors", "Failed", "Cancelled"}


def _undo_to_end(service: Service, operation_id: str) -> tuple[str, float, dict[str, Any]]:
    """Start the undo and poll it to a final status: its id, wall seconds and status."""
    with httpx.Client() as client:
        start = time.perf_counter()
        response = client.post(f"{service.url}/api/bulks/{operation_id}/undo", timeout=60)
        if response.status_code != 201:
            raise ServiceError(f"undo answered {response.status_code}: {response.text[:500]}")
        undo_id = str(response.json()["id"])
        status: dict[str, Any] = {}
        while status.get("status") not in TERMINAL:
            if time.perf_counter() - start > RUN_TIMEOUT:
                raise ServiceError(f"undo not finished in {RUN_TIMEOUT:.0f} s: {status}")
            time.sleep(POLL_INTERVAL)
            polled = client.get(f"{service.url}/api/bulks/{undo_id}/status")
            polled.raise_for_status()
            status = polled.json()
        return undo_id, time.perf_counter() - start, status


def undo_throughput(context: Context) -> Result:
    """Run a row operation over the rows, then undo it; report both rates."""
    rows = FULL_ROWS if context.sizes.name == "full" else QUICK_ROWS
    path = context.csv_of(rows)
    with data_dir() as directory, Service(directory) as service:
        forward = run_to_end(service, path, operation=BENCH_UNDO)
        if forward.status.get("status") != "Completed" or forward.rows != rows:
            raise RuntimeError(f"expected {rows:,} rows Completed, got {forward.status}")
        _, wall, status = _undo_to_end(service, forward.operation_id)
        peak = service.peak_rss()
    if status.get("status") != "Completed" or int(status.get("processedRows", 0)) != rows:
        raise RuntimeError(f"expected the undo of {rows:,} rows Completed, got {status}")
    undo_rate = rows / wall if wall > 0 else 0.0
    ratio = undo_rate / forward.rows_per_second
    result = Result(
        figures={
            "rows": rows,
            "forward_rows_per_s": round(forward.rows_per_second, 1),
            "forward_wall_s": round(forward.wall_seconds, 3),
            "undo_rows_per_s": round(undo_rate, 1),
            "undo_wall_s": round(wall, 3),
            "peak_rss_mb": round(peak / MB, 1),
        },
        notes=["The undo reads the operation's file again (no row data kept)."],
    )
    result.ratios["undo_vs_forward"] = ratio
    result.checks.append(at_least("undo vs forward rows/s", ratio, 0.3, "x"))
    return result
