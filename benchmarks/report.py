"""The terminal table of a benchmark run, and its JSON file."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import provenance
from benchmarks.context import Context
from benchmarks.results import Figure, Result
from benchmarks.scenarios import Scenario

_COLUMNS = ("#", "Scenario", "Check", "Measured", "Target", "Verdict")
_TITLE_WIDTH = 58


@dataclass(frozen=True)
class Outcome:
    """One scenario and what its run produced."""

    scenario: Scenario
    result: Result
    seconds: float


def _number(value: Figure) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return value


def _rows(outcomes: Sequence[Outcome], context: Context) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for outcome in outcomes:
        number = str(outcome.scenario.number)
        title = outcome.scenario.title_for(context.sizes)[:_TITLE_WIDTH]
        result = outcome.result
        if not result.checks:
            reason = result.skipped or result.error or ""
            rows.append(
                (number, title, "", "", outcome.scenario.target, f"{result.verdict} ({reason})")
            )
        for index, check in enumerate(result.checks):
            comparison = ">=" if check.at_least else "<="
            rows.append(
                (
                    number if index == 0 else "",
                    title if index == 0 else "",
                    check.label,
                    f"{_number(round(check.value, 3))} {check.unit}".strip(),
                    f"{comparison} {_number(check.limit)} {check.unit}".strip(),
                    check.verdict,
                )
            )
    return rows


def table(outcomes: Sequence[Outcome], context: Context) -> str:
    """The verdict table: one line per checked target."""
    rows = [_COLUMNS, *_rows(outcomes, context)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _figures_line(result: Result) -> str:
    parts = [f"{name}={_number(value)}" for name, value in result.figures.items()]
    parts += [f"{name}={value:.3f}" for name, value in result.ratios.items()]
    return "  ".join(parts)


def _breakdown_lines(number: int, breakdown: dict[str, Any]) -> list[str]:
    total = breakdown["mainThreadSeconds"]
    count = "calls" if breakdown["profiler"] == "cprofile" else "samples"
    lines = [
        f"Profile of scenario {number}: service main thread under {breakdown['profiler']}, "
        f"{total:.2f} s (profiled run {breakdown['profiledRowsPerSecond']:,.0f} rows/s)"
    ]
    for name, family in breakdown["families"].items():
        lines.append(
            f"  {name:<11}{family['seconds']:8.2f} s {family['share']:6.1%}  {family['covers']}"
        )
    lines.append(f"  hot spots (own time, {count}):")
    for spot in breakdown["hotSpots"][:10]:
        lines.append(f"    {spot['ownSeconds']:7.2f} s {spot[count]:>10,}  {spot['function']}")
    return lines


def details(outcomes: Sequence[Outcome]) -> str:
    """Every figure and ratio of every scenario, then the profiles."""
    lines = ["Figures:"]
    for outcome in outcomes:
        if outcome.result.figures or outcome.result.ratios:
            lines.append(f"  {outcome.scenario.number}: {_figures_line(outcome.result)}")
        for note in outcome.result.notes:
            lines.append(f"     note: {note}")
    for outcome in outcomes:
        if outcome.result.breakdown is not None:
            lines += ["", *_breakdown_lines(outcome.scenario.number, outcome.result.breakdown)]
    return "\n".join(lines)


def _source_line(source: dict[str, Any]) -> str:
    commit = (source["commit"] or "unknown")[:12]
    local = " + local changes in src/" if source["srcHasLocalChanges"] else ""
    return f"Source: commit {commit}{local} (newest src file {source['srcNewestChange']})"


def header(context: Context, started: datetime) -> str:
    """Mode, date, machine and the reference figures."""
    lines = [
        f"bulkops benchmark, {context.sizes.name} mode ({context.sizes.rows:,} rows), "
        f"{started:%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average at start {context.load_at_start[0]:.2f}",
        _source_line(provenance.describe(context.source_at_start)),
        "Reference (bare loop: csv.DictReader or json.loads, then BenchRow.model_validate):",
    ]
    for name, reference in context.references().items():
        lines.append(
            f"  {name:<32}{reference.rows_per_second:>12,.0f} rows/s  ({reference.seconds:.2f} s)"
        )
    return "\n".join(lines)


def document(
    outcomes: Sequence[Outcome], context: Context, started: datetime, seconds: float
) -> dict[str, Any]:
    """The JSON document of a run: every figure of every scenario."""
    return {
        "date": started.isoformat(timespec="seconds"),
        "mode": context.sizes.name,
        "totalSeconds": round(seconds, 1),
        "source": provenance.describe(context.source_at_start),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadAverageAtEnd": [round(x, 2) for x in os.getloadavg()],
            "loadAverageAtStart": context.load_at_start,
        },
        "sizes": {
            "rows": context.sizes.rows,
            "pipelineRows": context.sizes.pipeline_rows,
            "signalRows": context.sizes.signal_rows,
            "checkpointRows": context.sizes.checkpoint_rows,
            "pollSeconds": context.sizes.poll_seconds,
            "uploadBytes": context.sizes.upload_bytes,
        },
        "reference": {
            name: {
                "rows": ref.rows,
                "seconds": round(ref.seconds, 3),
                "rowsPerSecond": round(ref.rows_per_second, 1),
            }
            for name, ref in context.references().items()
        },
        "scenarios": [
            {
                "number": outcome.scenario.number,
                "title": outcome.scenario.title_for(context.sizes),
                "target": outcome.scenario.target,
                "seconds": round(outcome.seconds, 1),
                **outcome.result.to_json(),
            }
            for outcome in outcomes
        ],
    }


def write_json(path: Path, body: dict[str, Any]) -> None:
    """Write the document (creating the directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2) + "\n")


def now() -> datetime:
    """The run's start time, in UTC."""
    return datetime.now(UTC)
