"""Deterministic input files: N generated people as CSV and as JSON Lines."""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

SEED = 20240605
VERSION = 1  # bump when the generator changes, so cached files are not reused
COLUMNS = ("name", "email", "age", "department", "startDate")
DEPARTMENTS = ("Sales", "Finance", "Support", "Research", "Legal", "Ops", "Design", "HR")
_FIRST = ("Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Ken", "Linus", "Radia", "Tim")
_LAST = ("Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Thompson", "Perlman")
_EPOCH = date(2000, 1, 1)


@dataclass(frozen=True)
class InputFiles:
    """The generated files of one size."""

    rows: int
    csv: Path
    jsonl: Path


def people(rows: int, seed: int = SEED) -> Iterator[tuple[str, str, int, str, str]]:
    """``rows`` valid people, the same for the same seed (about 52 bytes a CSV row)."""
    rng = random.Random(seed)
    for number in range(1, rows + 1):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        start = _EPOCH + timedelta(days=rng.randrange(9000))
        yield (
            f"{first} {last}",
            f"{first.lower()}{number}@corp.io",
            rng.randrange(18, 70),
            rng.choice(DEPARTMENTS),
            start.isoformat(),
        )


def write_csv(path: Path, rows: int) -> Path:
    """Write the CSV file (header + ``rows`` data rows)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(people(rows))
    return path


def write_jsonl(path: Path, rows: int) -> Path:
    """Write the same rows as JSON Lines (one object per line)."""
    with path.open("w", encoding="utf-8") as fh:
        for person in people(rows):
            fh.write(json.dumps(dict(zip(COLUMNS, person, strict=True)), separators=(",", ":")))
            fh.write("\n")
    return path


def ensure_csv(directory: Path, rows: int) -> Path:
    """Generate (or reuse, when already there) the CSV file of ``rows`` rows."""
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = directory / f"people-v{VERSION}-{rows}.csv"
    if not csv_path.exists():
        write_csv(csv_path.with_suffix(".tmp"), rows).rename(csv_path)
    return csv_path


def ensure_inputs(directory: Path, rows: int) -> InputFiles:
    """Generate (or reuse, when already there) the CSV and JSON Lines of ``rows`` rows."""
    csv_path = ensure_csv(directory, rows)
    jsonl_path = directory / f"people-v{VERSION}-{rows}.jsonl"
    if not jsonl_path.exists():
        write_jsonl(jsonl_path.with_suffix(".tmp"), rows).rename(jsonl_path)
    return InputFiles(rows=rows, csv=csv_path, jsonl=jsonl_path)


def ensure_sized_csv(directory: Path, size: int) -> Path:
    """Generate (or reuse) a CSV file of at least ``size`` bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"people-v{VERSION}-{size}-bytes.csv"
    if path.exists():
        return path
    sample = directory / "sample.tmp"
    per_row = write_csv(sample, 1000).stat().st_size / 1000
    rows = math.ceil(size / per_row * 1.01)
    while write_csv(sample, rows).stat().st_size < size:
        rows = math.ceil(rows * 1.05)
    sample.rename(path)
    return path
