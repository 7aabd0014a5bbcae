"""The reference: the bare loop that reads the file and validates each row, nothing else."""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.operations import BenchRow


@dataclass(frozen=True)
class ReferenceResult:
    """How fast the bare loop went over one file."""

    rows: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        """Throughput of the bare loop."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def _csv_rows(path: Path) -> int:
    validate = BenchRow.model_validate
    count = 0
    with path.open(newline="", encoding="utf-8") as fh:
        for record in csv.DictReader(fh):
            validate(record)
            count += 1
    return count


def _jsonl_rows(path: Path) -> int:
    validate = BenchRow.model_validate
    loads = json.loads
    count = 0
    with path.open("rb") as fh:
        for line in fh:
            validate(loads(line))
            count += 1
    return count


def measure(path: Path) -> ReferenceResult:
    """Run the bare loop over a CSV or JSON Lines file (chosen by its suffix)."""
    loop = _jsonl_rows if path.suffix == ".jsonl" else _csv_rows
    start = time.perf_counter()
    rows = loop(path)
    return ReferenceResult(rows=rows, seconds=time.perf_counter() - start)
