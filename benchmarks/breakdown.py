"""Where the service's main thread spent a profiled run, grouped by function family.

Families are decided by source file. Time in a function of no family (the standard library,
C builtins, pydantic) goes to the family of its nearest calling ancestor that has one, so
the families add up to the profiled wall time of the main thread. This module reads
cProfile statistics (``from_cprofile``); ``benchmarks.sampling`` reads py-spy samples.
"""

from __future__ import annotations

import pstats
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Func = tuple[str, int, str]

IDLE_FUNCTION = "<method 'poll' of 'select.epoll' objects>"
IDLE = "idle"
OTHER = "other"
# (family, what it covers, path fragments), first match wins.
FAMILIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("parsing", "file reading and parsing (bulkops.formats)", ("/bulkops/formats/",)),
    (
        "validation",
        "row validation (pydantic model_validate, bulkops convert)",
        ("/bulkops/definition/conversion.py", "/pydantic/"),
    ),
    (
        "storage",
        "storage calls on the event loop (bulkops.storage, SQLAlchemy, aiosqlite)",
        ("/bulkops/storage/", "/sqlalchemy/", "/aiosqlite/", "/greenlet/"),
    ),
    (
        "engine",
        "engine bookkeeping (bulkops.engine: row records, counters, flushes, lease)",
        ("/bulkops/engine/", "/bulkops/clock.py"),
    ),
    (
        "http",
        "HTTP API (uvicorn, starlette, fastapi, bulkops.api and .service)",
        (
            *("/uvicorn/", "/starlette/", "/fastapi/", "/h11/", "/multipart/"),
            *("/python_multipart/", "/bulkops/api/", "/bulkops/service/"),
        ),
    ),
)
DESCRIPTIONS = {name: text for name, text, _ in FAMILIES} | {
    IDLE: "event loop idle: waiting for the SQLite thread, the row-count thread, the network",
    OTHER: "event loop and everything else",
}
# Plain data types used by every layer: their time belongs to whoever calls them.
_UNOWNED = ("/bulkops/storage/records.py", "/bulkops/storage/states.py")
_KEY_FUNCTIONS = (
    ("/bulkops/formats/csvfile.py", "read_csv"),
    ("/bulkops/formats/csvfile.py", "count_csv"),
    ("/bulkops/formats/jsonlines.py", "read_jsonl"),
    ("/bulkops/definition/conversion.py", "convert"),
    ("/bulkops/engine/rows.py", "run"),
    ("/bulkops/engine/rows.py", "new_record"),
    ("/bulkops/engine/loops.py", "run_plain"),
    ("/bulkops/engine/loops.py", "run_batches"),
    ("/bulkops/engine/recorder.py", "flush"),
    ("/bulkops/engine/recorder.py", "_write"),
    ("/bulkops/storage/sql/bulk.py", "row_upsert"),
    ("/bulkops/engine/processor.py", "_process"),
)


@dataclass
class Breakdown:
    """Main-thread seconds by family, the hottest functions and some inclusive times.

    ``hot_spots`` are (function, own seconds, count), the count being calls (cProfile) or
    samples (py-spy). ``threads`` is busy seconds by thread name (py-spy only).
    """

    profiler: str
    total: float
    families: dict[str, float]
    hot_spots: list[tuple[str, float, int]] = field(default_factory=list)
    cumulative: dict[str, float] = field(default_factory=dict)
    threads: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The breakdown as plain JSON data."""
        count = "calls" if self.profiler == "cprofile" else "samples"
        return {
            "profiler": self.profiler,
            "mainThreadSeconds": round(self.total, 3),
            "families": {
                name: {
                    "seconds": round(seconds, 3),
                    "share": round(seconds / self.total, 4) if self.total else 0.0,
                    "covers": DESCRIPTIONS[name],
                }
                for name, seconds in self.families.items()
            },
            "hotSpots": [
                {"function": name, "ownSeconds": round(own, 3), count: number}
                for name, own, number in self.hot_spots
            ],
            "cumulativeSeconds": {k: round(v, 3) for k, v in self.cumulative.items()},
            "threadBusySeconds": {k: round(v, 3) for k, v in self.threads.items()},
        }


def empty_families() -> dict[str, float]:
    """Every family at zero seconds, in display order."""
    return {name: 0.0 for name, _, _ in FAMILIES} | {IDLE: 0.0, OTHER: 0.0}


def family_of_path(path: str) -> str | None:
    """The family of a source file, or None."""
    if any(fragment in path for fragment in _UNOWNED):
        return None
    for name, _, fragments in FAMILIES:
        if any(fragment in path for fragment in fragments):
            return name
    return None


# Builtins have no file; pydantic's compiled validator is the one that matters here.
_BUILTIN_FAMILIES = (("validate_python", "validation"),)


def family_of(func: Func) -> str | None:
    """The family a cProfile function entry belongs to by its file (or, for a builtin, by
    its name), or None."""
    if func[0] == "~":
        return next((family for name, family in _BUILTIN_FAMILIES if name in func[2]), None)
    return family_of_path(func[0])


def short_name(func: Func) -> str:
    """``bulkops/engine/rows.py:95(run)``, or a builtin's own name."""
    path, line, name = func
    if path == "~":
        return name
    for marker in ("/site-packages/", "/src/", "/lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{line}({name})"


class _Owners:
    """Which families a function's callers (transitively) belong to, as weights."""

    def __init__(self, stats: dict[Func, Any]) -> None:
        self._stats = stats
        self._cache: dict[Func, dict[str, float]] = {}
        self._visiting: set[Func] = set()

    def of(self, func: Func) -> dict[str, float]:
        family = family_of(func)
        if family is not None:
            return {family: 1.0}
        if func in self._cache:
            return self._cache[func]
        if func in self._visiting or func not in self._stats:
            return {OTHER: 1.0}
        self._visiting.add(func)
        callers = self._stats[func][4]
        total = sum(edge[3] for edge in callers.values())
        weights: dict[str, float] = defaultdict(float)
        if total <= 0:
            weights[OTHER] = 1.0
        for caller, edge in callers.items() if total > 0 else ():
            for name, weight in self.of(caller).items():
                weights[name] += weight * edge[3] / total
        self._visiting.discard(func)
        self._cache[func] = dict(weights)
        return self._cache[func]


@contextmanager
def _deep_recursion(limit: int = 20_000) -> Iterator[None]:
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _attribute(stats: dict[Func, Any]) -> dict[str, float]:
    owners = _Owners(stats)
    families = empty_families()
    for func, (_cc, _nc, own, _cum, callers) in stats.items():
        family = IDLE if func[2] == IDLE_FUNCTION else family_of(func)
        if family is not None:
            families[family] += own
            continue
        attributed = 0.0
        for caller, edge in callers.items():
            for name, weight in owners.of(caller).items():
                families[name] += edge[2] * weight
            attributed += edge[2]
        families[OTHER] += max(0.0, own - attributed)
    return families


def _cumulative(stats: dict[Func, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for func, (_cc, _nc, _own, cum, _callers) in stats.items():
        for suffix, name in _KEY_FUNCTIONS:
            if func[2] == name and func[0].endswith(suffix):
                found[short_name(func)] = found.get(short_name(func), 0.0) + cum
    return found


def from_cprofile(profile: Path, top: int = 15) -> Breakdown:
    """Read a cProfile statistics file and group its time."""
    loaded = pstats.Stats(str(profile))
    stats: dict[Func, Any] = loaded.stats  # type: ignore[attr-defined]
    with _deep_recursion():
        families = _attribute(stats)
    ranked = sorted(
        (item for item in stats.items() if item[0][2] != IDLE_FUNCTION),
        key=lambda item: item[1][2],
        reverse=True,
    )
    hot = [(short_name(func), values[2], values[1]) for func, values in ranked[:top]]
    total: float = loaded.total_tt  # type: ignore[attr-defined]
    return Breakdown(
        profiler="cprofile",
        total=total,
        families=families,
        hot_spots=hot,
        cumulative=_cumulative(stats),
    )
