"""Reading py-spy's raw samples (``--format raw --threads --idle``) into a Breakdown."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from benchmarks.breakdown import IDLE, OTHER, Breakdown, empty_families, family_of_path

MAIN_THREAD = "MainThread"
# The event loop waiting in its selector: the main thread has nothing to run.
_IDLE_LEAF = re.compile(r"\bselect \(selectors\.py:\d+\)$")
_FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*):\d+\)$")


def _function(frame: str) -> tuple[str, str]:
    """(path, ``path(function)``) of one frame such as ``run (bulkops/engine/rows.py:95)``."""
    found = _FRAME.match(frame)
    if found is None:
        return "", frame
    path = found["path"]
    return path, f"{path}({found['function']})"


def _family(frames: list[str]) -> str:
    if _IDLE_LEAF.search(frames[-1]):
        return IDLE
    for frame in reversed(frames):
        family = family_of_path("/" + _function(frame)[0])
        if family is not None:
            return family
    return OTHER


def _main_thread_stacks(raw: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in raw.read_text(errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        if not head or not count.isdigit():
            continue
        thread, *frames = head.split(";")
        if thread.endswith(f": {MAIN_THREAD}") and frames:
            stacks[tuple(frames)] += int(count)
    return stacks


def from_pyspy(raw: Path, rate: int, top: int = 15) -> Breakdown:
    """Main-thread samples by family (nearest frame with a family), and the hottest leaves."""
    families = empty_families()
    leaves: Counter[str] = Counter()
    samples = 0
    for frames, count in _main_thread_stacks(raw).items():
        family = _family(list(frames))
        families[family] += count / rate
        samples += count
        if family != IDLE:
            leaves[_function(frames[-1])[1]] += count
    hot = [(name, count / rate, count) for name, count in leaves.most_common(top)]
    return Breakdown(profiler="py-spy", total=samples / rate, families=families, hot_spots=hot)
