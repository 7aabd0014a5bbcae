"""Scenarios 17 and 18: storing each row as it finishes, and compound faults.

Scenario 17 runs ``bench-two-steps`` (two steps of 5 ms each) at MaxRowConcurrency 10,
with the default batching and with ``BULKOPS_FLUSH_ROWS=1`` (each finished row stored in a
transaction of its own unless others finished meanwhile), on SQLite and on PostgreSQL; the
ideal is 10 rows at a time / 10 ms = 1,000 rows/s. Scenario 18 is the chaos run of
``benchmarks/chaos.py`` (``make chaos`` runs it on more seeds): repeated executions per
fault kind, against the bound of 2 x workers x MaxRowConcurrency per fault.
"""

from __future__ import annotations

from benchmarks.chaos import KINDS, run_chaos
from benchmarks.client import run_to_end
from benchmarks.context import Context, data_dir
from benchmarks.operations import BENCH_TWO_STEPS, TWO_STEP_SLEEP
from benchmarks.results import Result, at_least, at_most
from benchmarks.scaleout import postgres_database
from benchmarks.service import Service

CONCURRENCY = 10
STEPS = 2


def _rows_per_second(context: Context, rows: int, env: dict[str, str]) -> float:
    path = context.csv_of(rows)
    with (
        data_dir() as directory,
        Service(directory, max_row_concurrency=CONCURRENCY, env=env) as service,
    ):
        run = run_to_end(service, path, operation=BENCH_TWO_STEPS)
    if run.status.get("status") != "Completed" or run.rows != rows:
        raise AssertionError(f"the run did not complete every row: {run.status}")
    return run.rows_per_second


def flush_each_row(context: Context) -> Result:
    """Scenario 17: the two-step pipeline with batched writes and with FLUSH_ROWS=1."""
    rows = context.sizes.pipeline_rows // 4
    ideal = CONCURRENCY / (STEPS * TWO_STEP_SLEEP)
    result = Result()
    result.figures["ideal_rows_per_s"] = round(ideal, 1)
    with postgres_database() as postgres:
        for database, url in (("sqlite", None), ("postgres", postgres)):
            base = {"BULKOPS_DATABASE_URL": url} if url else {}
            batched = _rows_per_second(context, rows, base)
            each = _rows_per_second(context, rows, {**base, "BULKOPS_FLUSH_ROWS": "1"})
            result.figures[f"{database}_batched_rows_per_s"] = round(batched, 1)
            result.figures[f"{database}_flush_rows_1_rows_per_s"] = round(each, 1)
            result.ratios[f"{database}_flush_rows_1_vs_ideal"] = each / ideal
            result.checks.append(
                at_least(f"{database} FLUSH_ROWS=1 share of ideal", each / ideal * 100, 50, "%")
            )
    result.notes.append(
        f"{rows} rows; ideal = {CONCURRENCY} rows at a time / ({STEPS} x {TWO_STEP_SLEEP} s)"
    )
    return result


def compound_faults(context: Context) -> Result:
    """Scenario 18: the chaos run; repeated executions per fault kind."""
    quick = context.sizes.name == "quick"
    seeds, seconds = ((1,), 20.0) if quick else ((1, 2), 40.0)
    result = Result()
    most = 0
    bound = 0
    for seed in seeds:
        outcome = run_chaos(seed, seconds, rows=1500 if quick else 3000)
        bound = outcome.bound
        for kind, entry in outcome.by_kind().items():
            faults = result.figures.get(f"{kind}_faults", 0)
            repeats = result.figures.get(f"{kind}_repeats", 0)
            result.figures[f"{kind}_faults"] = int(faults) + entry["faults"]
            result.figures[f"{kind}_repeats"] = int(repeats) + entry["repeats"]
            most = max(most, entry["most"])
        result.figures[f"seed_{seed}_executions"] = outcome.executions
    for kind in KINDS:
        faults = int(result.figures.get(f"{kind}_faults", 0))
        if faults:
            per_fault = int(result.figures.get(f"{kind}_repeats", 0)) / faults
            result.figures[f"{kind}_repeats_per_fault"] = round(per_fault, 1)
    result.figures["bound_per_fault"] = bound
    result.checks.append(at_most("most repeats of one fault", most, bound))
    result.notes.append(
        f"seeds {', '.join(map(str, seeds))}, {seconds:g} s of faults each; 3 workers, "
        "MaxRowConcurrency 10, a private PostgreSQL server and moto's S3 server, each "
        "behind a proxy the run controls"
    )
    return result
