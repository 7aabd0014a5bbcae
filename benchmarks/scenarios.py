"""The scenario table of issue 5: each scenario is one function from Context to Result."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import load
from benchmarks.client import Run, run_to_end, upload
from benchmarks.context import Context, Sizes, data_dir
from benchmarks.procfs import MB, RssSampler, reset_peak_rss
from benchmarks.profilers import make_profiler
from benchmarks.results import Figure, Result, at_least, at_most
from benchmarks.service import Service

Measure = Callable[[Context], Result]


@dataclass(frozen=True)
class Scenario:
    """One row of the scenario table. ``measure`` is None until the feature exists."""

    number: int
    title: str  # may name {rows} and {upload_mb}, filled in from the mode's sizes
    target: str
    measure: Measure | None = None
    todo: str | None = None

    def title_for(self, sizes: Sizes) -> str:
        """The title with this mode's sizes."""
        return self.title.format(rows=f"{sizes.rows:,}", upload_mb=sizes.upload_bytes // MB)

    def run(self, context: Context) -> Result:
        """Measure, or SKIP with the reason; a failure becomes an ERROR result."""
        if self.measure is None:
            return Result(skipped=self.todo or "not implemented")
        try:
            return self.measure(context)
        except Exception as exc:
            return Result(error=f"{type(exc).__name__}: {exc}")


def _check_complete(run: Run, rows: int) -> None:
    status = run.status
    if status.get("status") != "Completed" or run.rows != rows or status.get("errorCount"):
        raise RuntimeError(f"expected {rows:,} rows Completed without errors, got {status}")


def _run_figures(run: Run) -> dict[str, Figure]:
    return {
        "rows": run.rows,
        "wall_s": round(run.wall_seconds, 3),
        "upload_s": round(run.upload_seconds, 3),
        "rows_per_s": round(run.rows_per_second, 1),
        "service_cpu_s": round(run.cpu.process, 2),
        "main_thread_cpu_s": round(run.cpu.main_thread, 2),
        "other_threads_cpu_s": round(run.cpu.other_threads, 2),
        "busiest_other_thread_cpu_s": round(run.cpu.busiest_other_thread, 2),
        "main_thread_busy_share": round(run.cpu.main_thread / run.wall_seconds, 3),
        "peak_rss_mb": round(run.peak_rss / MB, 1),
    }


def _profiled(context: Context, name: str, path: Path) -> dict[str, Any]:
    """The same upload to a profiled service, grouped by function family."""
    with data_dir() as directory:
        profiler = make_profiler(name, directory)
        with Service(directory, command=profiler.command()) as service:
            run = run_to_end(service, path, profiler=profiler)
        _check_complete(run, context.sizes.rows)
        breakdown = profiler.analyse().to_json()
        if context.profile_dir is not None:
            context.profile_dir.mkdir(parents=True, exist_ok=True)
            kept = f"profile-{path.suffix.lstrip('.')}-{name}{profiler.output.suffix}"
            profiler.output.replace(context.profile_dir / kept)
    breakdown["profiledWallSeconds"] = round(run.wall_seconds, 3)
    breakdown["profiledRowsPerSecond"] = round(run.rows_per_second, 1)
    return breakdown


def _throughput(context: Context, path: Path) -> Result:
    reference = context.reference(path)
    run = context.plain_run(path)
    _check_complete(run, context.sizes.rows)
    ratio = run.rows_per_second / reference.rows_per_second
    result = Result(figures=_run_figures(run))
    result.figures["reference_rows_per_s"] = round(reference.rows_per_second, 1)
    result.figures["reference_s"] = round(reference.seconds, 3)
    result.ratios["throughput_vs_reference"] = ratio
    result.checks.append(at_least("throughput vs reference", ratio, 0.5, "x"))
    if context.profiler is not None:
        result.breakdown = _profiled(context, context.profiler, path)
    return result


def csv_throughput(context: Context) -> Result:
    """Scenario 1: the CSV file through a row operation with an empty process_row."""
    return _throughput(context, context.inputs.csv)


def jsonl_throughput(context: Context) -> Result:
    """Scenario 3: the same rows as JSON Lines."""
    return _throughput(context, context.inputs.jsonl)


def csv_memory(context: Context) -> Result:
    """Scenario 2: peak RSS, and RSS at the end against RSS at a tenth of the rows."""
    run = context.plain_run(context.inputs.csv)
    _check_complete(run, context.sizes.rows)
    checkpoint = context.sizes.checkpoint_rows
    early = next((s for s in run.samples if s.processed >= checkpoint), run.samples[0])
    end = run.samples[-1]
    growth = end.rss / early.rss
    result = Result(
        figures={
            "peak_rss_mb": round(run.peak_rss / MB, 1),
            "checkpoint_rows": checkpoint,
            "rows_at_early_sample": early.processed,
            "rss_early_mb": round(early.rss / MB, 1),
            "rows_at_end": end.processed,
            "rss_end_mb": round(end.rss / MB, 1),
            "rss_samples": len(run.samples),
        },
        notes=["Same service process and run as scenario 1; VmRSS sampled at every status poll."],
    )
    result.ratios["rss_end_vs_early"] = growth
    result.checks.append(at_most("peak RSS", run.peak_rss / MB, 300, "MB"))
    result.checks.append(at_most("RSS at end vs at a tenth of the rows", growth, 1.3, "x"))
    return result


def status_latency(context: Context) -> Result:
    """Scenario 6: 20 clients poll GET /status while a scenario-1-like run goes on."""
    path = context.inputs.csv
    reference = context.reference(path)
    pollers: list[load.BackgroundLoad] = []
    with data_dir() as directory, Service(directory) as service:

        def start_polling(operation_id: str) -> None:
            url = f"{service.url}/api/bulks/{operation_id}/status"
            pollers.append(load.BackgroundLoad(url, context.sizes.poll_seconds))
            pollers[0].start()

        run = run_to_end(service, path, on_uploaded=start_polling)
        pollers[0].join(context.sizes.poll_seconds + 60)
        if pollers[0].failure is not None:
            raise pollers[0].failure
        status_url = f"{service.url}/api/bulks/{run.operation_id}/status"
        idle = asyncio.run(load.poll_status(status_url, min(3.0, context.sizes.poll_seconds)))
    _check_complete(run, context.sizes.rows)
    polled = pollers[0].result
    ms = 1000.0
    result = Result(
        figures={
            "clients": load.CLIENTS,
            "interval_per_client_s": load.INTERVAL,
            "poll_s": round(polled.seconds, 2),
            "requests": len(polled.latencies) + polled.errors,
            "errors": polled.errors,
            "p50_ms": round(polled.percentile(50) * ms, 2),
            "p95_ms": round(polled.percentile(95) * ms, 2),
            "p99_ms": round(polled.percentile(99) * ms, 2),
            "max_ms": round(max(polled.latencies, default=0.0) * ms, 2),
            "overlap_with_run_s": round(
                min(polled.seconds, run.wall_seconds - run.upload_seconds), 2
            ),
            "idle_p50_ms": round(idle.percentile(50) * ms, 2),
            "idle_p99_ms": round(idle.percentile(99) * ms, 2),
            "idle_errors": idle.errors,
            "run_rows_per_s": round(run.rows_per_second, 1),
            "run_wall_s": round(run.wall_seconds, 3),
        },
        notes=[
            "idle_* figures: the same 20 clients polling the same status after the run ended.",
            *([f"first errors: {polled.error_samples}"] if polled.error_samples else []),
        ],
    )
    result.ratios["run_throughput_vs_reference"] = run.rows_per_second / reference.rows_per_second
    result.checks.append(at_most("p99 status latency", polled.percentile(99) * ms, 50, "ms"))
    result.checks.append(at_most("errors", polled.errors, 0))
    return result


def upload_speed(context: Context) -> Result:
    """Scenario 8: time the POST of a large CSV and watch the service's memory meanwhile."""
    path = context.sized_csv()
    size = path.stat().st_size
    csv_reference = context.reference(context.inputs.csv)
    reference_mb_per_s = context.inputs.csv.stat().st_size / MB / csv_reference.seconds
    with data_dir() as directory, Service(directory) as service, httpx.Client() as client:
        rss_before = service.rss()
        hwm_reset = reset_peak_rss(service.pid)
        sampler = RssSampler(service.pid)
        sampler.start()
        start = time.perf_counter()
        operation_id = upload(client, service.url, path)
        seconds = time.perf_counter() - start
        sampled_peak = sampler.stop()
        peak = service.peak_rss() if hwm_reset else sampled_peak
        rss_after = service.rss()
        client.post(f"{service.url}/api/bulks/{operation_id}/cancel")
    rate = size / MB / seconds
    increase = max(0, peak - rss_before) / MB
    result = Result(
        figures={
            "file_mb": round(size / MB, 1),
            "upload_s": round(seconds, 3),
            "upload_mb_per_s": round(rate, 1),
            "rss_before_mb": round(rss_before / MB, 1),
            "rss_after_mb": round(rss_after / MB, 1),
            "peak_rss_during_upload_mb": round(peak / MB, 1),
            "peak_increase_mb": round(increase, 1),
            "peak_source": "VmHWM reset before upload" if hwm_reset else "sampled VmRSS",
            "sampled_peak_mb": round(sampled_peak / MB, 1),
            "reference_mb_per_s": round(reference_mb_per_s, 1),
        },
        notes=["The operation is cancelled right after the upload is answered."],
    )
    result.ratios["upload_vs_reference_mb_per_s"] = rate / reference_mb_per_s
    result.checks.append(at_least("upload rate", rate, 100, "MB/s"))
    result.checks.append(at_most("peak RSS increase", increase, 50, "MB"))
    return result


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        1,
        "{rows}-row CSV, empty process_row, SQLite, concurrency 1",
        "throughput >= 0.5 x reference",
        csv_throughput,
    ),
    Scenario(
        2,
        "Same file, memory",
        "peak RSS <= 300 MB; RSS at end <= 1.3 x RSS at a tenth of the rows",
        csv_memory,
    ),
    Scenario(3, "{rows}-row JSON Lines", "throughput >= 0.5 x reference", jsonl_throughput),
    # TODO(issue 5): 20,000-row pipeline, 3 steps of asyncio.sleep(0.01), MaxRowConcurrency
    # 100; target >= 80% of 3,333 rows/s. Add one measure function once pipelines exist.
    Scenario(
        4,
        "20,000-row pipeline, 3 sleeping steps, concurrency 100",
        ">= 80% of 3,333 rows/s",
        todo="needs pipelines",
    ),
    # TODO(issue 5): 1,000 rows waiting at a signal step, signalled over HTTP by 20
    # concurrent connections; targets >= 500 signals/s, last row done <= 1 s after.
    Scenario(
        5,
        "1,000 rows at a signal step, signalled by 20 connections",
        ">= 500 signals/s; last row <= 1 s after last signal",
        todo="needs signals",
    ),
    Scenario(
        6,
        "20 clients poll GET /status during a {rows}-row CSV run",
        "p99 latency <= 50 ms, no errors",
        status_latency,
    ),
    # TODO(issue 5): export (report, CSV) of the 1,000,000-row operation; targets >= 0.5 x
    # reference throughput and peak RSS <= 300 MB.
    Scenario(
        7,
        "Export (report, CSV) of the {rows}-row operation",
        ">= 0.5 x reference; peak RSS <= 300 MB",
        todo="needs export",
    ),
    Scenario(
        8,
        "Create of a {upload_mb} MB CSV file",
        "upload >= 100 MB/s; peak RSS increase <= 50 MB",
        upload_speed,
    ),
)
