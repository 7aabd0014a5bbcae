"""The scenario table of issue 5: each scenario is one function from Context to Result."""

from __future__ import annotations

import asyncio
import csv
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import load, signalling
from benchmarks.client import Run, download_export, run_to_end, upload
from benchmarks.context import Context, Sizes, data_dir
from benchmarks.durability import compound_faults, flush_each_row
from benchmarks.gateway import gateway_overhead
from benchmarks.operations import (
    BATCH_SIZE,
    BENCH_BATCH,
    BENCH_PIPELINE,
    BENCH_SIGNALS,
    PIPELINE_STEPS,
    STEP_SLEEP,
)
from benchmarks.procfs import MB, RssSampler
from benchmarks.profilers import make_profiler
from benchmarks.reads import concurrent_uploads, read_latency
from benchmarks.results import Figure, Result, at_least, at_most
from benchmarks.scaleout import postgres_throughput, worker_speedup
from benchmarks.service import Service
from benchmarks.sharing import (
    closed_loop_readers,
    second_tenant,
    slow_split_default,
    small_behind_backlog,
)
from benchmarks.spreadsheet import xlsx_import
from benchmarks.undo import undo_throughput

Measure = Callable[[Context], Result]

PIPELINE_CONCURRENCY = 100  # scenario 4
SIGNAL_CONCURRENCY = 1000  # scenario 5: every row holds a slot while it waits
MS = 1000.0


@dataclass(frozen=True)
class Scenario:
    """One row of the scenario table. ``measure`` is None until the feature exists."""

    number: int
    title: str  # may name {rows}, {pipeline_rows}, {signal_rows} and {upload_mb} (mode's sizes)
    target: str
    measure: Measure | None = None
    todo: str | None = None

    def title_for(self, sizes: Sizes) -> str:
        """The title with this mode's sizes."""
        return self.title.format(
            rows=f"{sizes.rows:,}",
            pipeline_rows=f"{sizes.pipeline_rows:,}",
            signal_rows=f"{sizes.signal_rows:,}",
            upload_mb=sizes.upload_bytes // MB,
        )

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
        "helper_cpu_s": round(run.cpu.helpers, 2),
        "total_cpu_s": round(run.cpu.tree, 2),
        "peak_rss_mb": round(run.peak_rss / MB, 1),
        "helper_peak_rss_mb": round(run.helpers_peak_rss / MB, 1),
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


def _throughput(context: Context, path: Path, least: float) -> Result:
    reference = context.reference(path)
    run = context.plain_run(path)
    _check_complete(run, context.sizes.rows)
    ratio = run.rows_per_second / reference.rows_per_second
    result = Result(figures=_run_figures(run))
    result.figures["reference_rows_per_s"] = round(reference.rows_per_second, 1)
    result.figures["reference_s"] = round(reference.seconds, 3)
    result.ratios["throughput_vs_reference"] = ratio
    result.checks.append(at_least("throughput vs reference", ratio, least, "x"))
    if context.profiler is not None:
        result.breakdown = _profiled(context, context.profiler, path)
    return result


def csv_throughput(context: Context) -> Result:
    """Scenario 1: the CSV file through a row operation with an empty process_row."""
    return _throughput(context, context.inputs.csv, 1.0)


def jsonl_throughput(context: Context) -> Result:
    """Scenario 3: the same rows as JSON Lines."""
    return _throughput(context, context.inputs.jsonl, 0.5)


def batch_throughput(context: Context) -> Result:
    """Scenario 14: scenario 1's file through a batch operation (batches of 500)."""
    path = context.inputs.csv
    reference = context.reference(path)
    with data_dir() as directory, Service(directory) as service:
        run = run_to_end(service, path, operation=BENCH_BATCH)
    _check_complete(run, context.sizes.rows)
    ratio = run.rows_per_second / reference.rows_per_second
    result = Result(figures=_run_figures(run))
    result.figures["batch_size"] = BATCH_SIZE
    result.figures["reference_rows_per_s"] = round(reference.rows_per_second, 1)
    row_by_row = context.plain_run(path)
    result.figures["row_by_row_rows_per_s"] = round(row_by_row.rows_per_second, 1)
    result.ratios["throughput_vs_reference"] = ratio
    result.ratios["row_by_row_vs_reference"] = row_by_row.rows_per_second / (
        reference.rows_per_second
    )
    result.checks.append(at_least("throughput vs reference", ratio, 0.5, "x"))
    return result


def dry_run_throughput(context: Context) -> Result:
    """Scenario 16: a dry run of scenario 1's file (every row validated, nothing run),
    against the bare parse-and-validate loop (the reference)."""
    path = context.inputs.csv
    reference = context.reference(path)
    with data_dir() as directory, Service(directory) as service:
        run = run_to_end(service, path, fields={"dryRun": "true"})
    _check_complete(run, context.sizes.rows)
    ratio = run.rows_per_second / reference.rows_per_second
    result = Result(figures=_run_figures(run))
    result.figures["reference_rows_per_s"] = round(reference.rows_per_second, 1)
    result.ratios["throughput_vs_reference"] = ratio
    result.checks.append(at_least("throughput vs reference", ratio, 0.6, "x"))
    return result


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
            base = f"{service.url}/api/bulks/{operation_id}"
            seconds = context.sizes.poll_seconds
            pollers.append(load.BackgroundLoad(f"{base}/status", seconds))
            # Two dashboards on the operation's page: its first page of rows.
            pollers.append(load.BackgroundLoad(f"{base}/rows?pageSize=25", seconds, clients=2))
            for poller in pollers:
                poller.start()

        run = run_to_end(service, path, on_uploaded=start_polling)
        for poller in pollers:
            poller.join(context.sizes.poll_seconds + 60)
            if poller.failure is not None:
                raise poller.failure
        status_url = f"{service.url}/api/bulks/{run.operation_id}/status"
        idle = asyncio.run(load.poll_status(status_url, min(3.0, context.sizes.poll_seconds)))
    _check_complete(run, context.sizes.rows)
    polled, rows = pollers[0].result, pollers[1].result
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
            "rows_page_requests": len(rows.latencies) + rows.errors,
            "rows_page_p50_ms": round(rows.percentile(50) * ms, 2),
            "rows_page_p99_ms": round(rows.percentile(99) * ms, 2),
            "idle_p50_ms": round(idle.percentile(50) * ms, 2),
            "idle_p99_ms": round(idle.percentile(99) * ms, 2),
            "idle_errors": idle.errors,
            "run_rows_per_s": round(run.rows_per_second, 1),
            "run_wall_s": round(run.wall_seconds, 3),
        },
        notes=[
            "idle_* figures: the same 20 clients polling the same status after the run ended.",
            "rows_page_* figures: 2 more clients polling the first page of the operation's rows "
            "(the dashboard's rows table) every 0.1 s meanwhile.",
            *([f"first errors: {polled.error_samples}"] if polled.error_samples else []),
        ],
    )
    result.ratios["run_throughput_vs_reference"] = run.rows_per_second / reference.rows_per_second
    result.checks.append(at_most("p99 status latency", polled.percentile(99) * ms, 50, "ms"))
    result.checks.append(at_most("errors", polled.errors + rows.errors, 0))
    return result


def upload_speed(context: Context) -> Result:
    """Scenario 8: time the POST of a large CSV and watch the service's memory meanwhile."""
    path = context.sized_csv()
    size = path.stat().st_size
    csv_reference = context.reference(context.inputs.csv)
    reference_mb_per_s = context.inputs.csv.stat().st_size / MB / csv_reference.seconds
    with data_dir() as directory, Service(directory) as service, httpx.Client() as client:
        rss_before = service.rss()
        hwm_reset = service.reset_peak_rss()
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


def pipeline_throughput(context: Context) -> Result:
    """Scenario 4: three steps that each sleep 10 ms, 100 rows at a time."""
    rows = context.sizes.pipeline_rows
    path = context.csv_of(rows)
    with (
        data_dir() as directory,
        Service(directory, max_row_concurrency=PIPELINE_CONCURRENCY) as service,
    ):
        run = run_to_end(service, path, operation=BENCH_PIPELINE)
    _check_complete(run, rows)
    ideal = PIPELINE_CONCURRENCY / (PIPELINE_STEPS * STEP_SLEEP)
    share = run.rows_per_second / ideal
    result = Result(figures=_run_figures(run))
    result.figures["max_row_concurrency"] = PIPELINE_CONCURRENCY
    result.figures["ideal_rows_per_s"] = round(ideal, 1)
    result.figures["share_of_ideal"] = round(share, 3)
    result.notes.append(
        f"ideal = {PIPELINE_CONCURRENCY} rows at a time / ({PIPELINE_STEPS} x {STEP_SLEEP} s)"
    )
    result.ratios["throughput_vs_ideal"] = share
    result.checks.append(at_least("share of ideal rows/s", share * 100, 80, "%"))
    return result


def _emails(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [record["email"] for record in csv.DictReader(fh)]


def signal_throughput(context: Context) -> Result:
    """Scenario 5: every row waits at a signal step; 20 connections signal them all."""
    rows = context.sizes.signal_rows
    path = context.csv_of(rows)
    keys = _emails(path)  # the signal key of bench-signals: unique per row
    with (
        data_dir() as directory,
        Service(directory, max_row_concurrency=SIGNAL_CONCURRENCY) as service,
        httpx.Client() as client,
    ):
        operation_id = upload(client, service.url, path, BENCH_SIGNALS)
        waited = signalling.wait_until_waiting(client, service.url, operation_id, rows)
        cpu_before = service.cpu()
        run = asyncio.run(signalling.signal_all(service.url, operation_id, keys))
        cpu = service.cpu() - cpu_before
        if run.completion_delay is None:
            client.post(f"{service.url}/api/bulks/{operation_id}/cancel")
    answers = run.answers
    result = Result(
        figures={
            "rows": rows,
            "connections": signalling.CONNECTIONS,
            "max_row_concurrency": SIGNAL_CONCURRENCY,
            "all_waiting_after_s": round(waited, 3),
            "signals_accepted": run.accepted,
            "errors": answers.errors,
            "signalling_s": round(answers.seconds, 3),
            "signals_per_s": round(run.signals_per_second, 1),
            "signal_p50_ms": round(answers.percentile(50) * MS, 2),
            "signal_p99_ms": round(answers.percentile(99) * MS, 2),
            "signal_max_ms": round(max(answers.latencies, default=0.0) * MS, 2),
            "service_cpu_s": round(cpu.process, 2),
            "main_thread_cpu_s": round(cpu.main_thread, 2),
        },
        notes=[
            "Clock from the first POST to the last 200 answer; the completion delay runs "
            "from that answer to the first status poll (every 20 ms) that sees a final status.",
            "CPU figures: from just before the connections open to the final status.",
            *([f"first errors: {answers.error_samples}"] if answers.error_samples else []),
        ],
    )
    result.checks.append(at_least("signals accepted per second", run.signals_per_second, 1000))
    result.checks.append(at_most("signal errors", answers.errors, 0))
    if run.completion_delay is None:
        result.notes.append("Not every row was signalled: the operation was cancelled.")
        return result
    status = run.status
    if status.get("status") != "Completed" or status.get("processedRows") != rows:
        raise RuntimeError(f"expected {rows:,} rows Completed after the signals, got {status}")
    result.figures["completion_delay_s"] = round(run.completion_delay, 3)
    result.figures["status_polls_after_last_signal"] = run.status_polls
    result.checks.append(at_most("last row done after last signal", run.completion_delay, 1.0, "s"))
    return result


def export_report(context: Context) -> Result:
    """Scenario 7: stream the report of scenario 1's operation as CSV, from its service."""
    path = context.inputs.csv
    rows = context.sizes.rows
    reference = context.reference(path)
    run = context.plain_run(path)
    _check_complete(run, rows)
    service = context.plain_run_service(path)
    params = {"mode": "report", "format": "csv"}
    with httpx.Client() as client:
        rss_before = service.rss()
        hwm_reset = service.reset_peak_rss()
        sampler = RssSampler(service.pid, interval=0.01)
        cpu_before = service.cpu()
        sampler.start()
        download = download_export(client, service.url, run.operation_id, params)
        sampled_peak = sampler.stop()
        cpu = service.cpu() - cpu_before
        peak = service.peak_rss() if hwm_reset else sampled_peak
    if download.lines != rows + 1:
        raise RuntimeError(f"expected a header and {rows:,} lines, got {download.lines:,}")
    rate = rows / download.seconds
    ratio = rate / reference.rows_per_second
    result = Result(
        figures={
            "rows": rows,
            "export_mb": round(download.size / MB, 1),
            "export_s": round(download.seconds, 3),
            "first_byte_s": round(download.first_byte_seconds, 3),
            "rows_per_s": round(rate, 1),
            "mb_per_s": round(download.size / MB / download.seconds, 1),
            "service_cpu_s": round(cpu.process, 2),
            "main_thread_cpu_s": round(cpu.main_thread, 2),
            "other_threads_cpu_s": round(cpu.other_threads, 2),
            "rss_before_mb": round(rss_before / MB, 1),
            "peak_rss_mb": round(peak / MB, 1),
            "peak_source": "VmHWM reset before export" if hwm_reset else "sampled VmRSS",
            "sampled_peak_mb": round(sampled_peak / MB, 1),
            "reference_rows_per_s": round(reference.rows_per_second, 1),
        },
        notes=[
            "Scenario 1's operation, exported by the service process that ran it "
            "(a fresh run first when scenario 1 was not run)."
        ],
    )
    result.ratios["throughput_vs_reference"] = ratio
    result.checks.append(at_least("throughput vs reference", ratio, 0.5, "x"))
    result.checks.append(at_most("peak RSS", peak / MB, 300, "MB"))
    return result


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        1,
        "{rows}-row CSV, empty process_row, SQLite, concurrency 1",
        "throughput >= 1.0 x reference (the bare single-core loop)",
        csv_throughput,
    ),
    Scenario(
        2,
        "Same file, memory",
        "peak RSS <= 300 MB; RSS at end <= 1.3 x RSS at a tenth of the rows",
        csv_memory,
    ),
    Scenario(3, "{rows}-row JSON Lines", "throughput >= 0.5 x reference", jsonl_throughput),
    Scenario(
        4,
        "{pipeline_rows}-row pipeline, 3 sleeping steps, concurrency 100",
        ">= 80% of 3,333 rows/s",
        pipeline_throughput,
    ),
    Scenario(
        5,
        "{signal_rows} rows at a signal step, signalled by 20 connections",
        ">= 500 signals/s; last row <= 1 s after last signal",
        signal_throughput,
    ),
    Scenario(
        6,
        "20 clients poll GET /status during a {rows}-row CSV run",
        "p99 latency <= 50 ms, no errors",
        status_latency,
    ),
    Scenario(
        7,
        "Export (report, CSV) of the {rows}-row operation",
        ">= 0.5 x reference; peak RSS <= 300 MB",
        export_report,
    ),
    Scenario(
        8,
        "Create of a {upload_mb} MB CSV file",
        "upload >= 100 MB/s; peak RSS increase <= 50 MB",
        upload_speed,
    ),
    Scenario(
        9,
        "Gateway: GET /status overhead; page 10 of a list merged from 3 backends",
        "no failed request (latency reported, no target)",
        gateway_overhead,
    ),
    Scenario(
        10,
        "PostgreSQL: one operation of 20 ms rows on 1, 2 and 3 worker processes",
        ">= 1.7 x with two workers against one",
        worker_speedup,
    ),
    Scenario(
        11,
        "PostgreSQL: the {rows}-row CSV file, API process + one worker; read routes",
        ">= 0.7 x reference",
        postgres_throughput,
    ),
    Scenario(
        12,
        "Read routes on the {rows}-row operation and on a 1,000-row one",
        "each <= 20 ms and <= 3 x the small operation's",
        read_latency,
    ),
    Scenario(
        13,
        "20 uploads at once (20,000 rows each) vs one upload; then with 8 polling clients",
        ">= 0.8 x one upload; >= 0.5 x with readers",
        concurrent_uploads,
    ),
    Scenario(
        14,
        "{rows}-row CSV, batch operation (batches of 500, empty process_batch)",
        ">= 0.5 x reference",
        batch_throughput,
    ),
    Scenario(
        15,
        "200,000-row XLSX workbook (20,000 in quick mode) beside the same rows as CSV",
        ">= 0.5 x the bare openpyxl loop; RSS at end <= 1.3 x RSS at a tenth",
        xlsx_import,
    ),
    Scenario(
        16,
        "Dry run of the {rows}-row CSV (every row validated, nothing run)",
        ">= 0.6 x reference",
        dry_run_throughput,
    ),
    Scenario(
        17,
        "Two 5 ms steps at concurrency 10, batched and with BULKOPS_FLUSH_ROWS=1",
        ">= 50% of 1,000 rows/s with FLUSH_ROWS=1 (SQLite and PostgreSQL)",
        flush_each_row,
    ),
    Scenario(
        18,
        "Compound faults: workers killed, connections cut, database restarted, silent "
        "partitions, S3 outages",
        "repeats of one fault <= 2 x workers x MaxRowConcurrency",
        compound_faults,
    ),
    Scenario(
        19,
        "10-row import behind 8 imports of 2,000 rows of 10 ms (one serve, defaults)",
        "within max(2 s, 10 x alone)",
        small_behind_backlog,
    ),
    Scenario(
        20,
        "Second tenant's import beside a first tenant's 6 (rows of 10 ms, defaults)",
        ">= 0.35 of the rows",
        second_tenant,
    ),
    Scenario(
        21,
        "PostgreSQL: 6,000, 12,000 and 30,000 rows of 20 ms on 1, 2 and 4 workers, defaults",
        ">= 1.8 x with two workers and >= 3.4 x with four against one, at every size",
        slow_split_default,
    ),
    Scenario(
        22,
        "20 uploads at once, quiet and with 8 closed-loop readers (status, errors, list)",
        ">= 0.8 x quiet; read p99 <= 50 ms",
        closed_loop_readers,
    ),
    Scenario(
        23,
        "Undo of a 100,000-row operation (5,000 in quick mode) beside its forward run",
        ">= 0.3 x the forward run's rows/s",
        undo_throughput,
    ),
)
