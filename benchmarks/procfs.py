"""Figures of a running process read from /proc: resident memory and CPU seconds.

A service is a tree of processes: ``serve`` (the HTTP process), its worker processes and
their row helpers. The ``*_tree`` readings add up the whole tree, what a user's machine
pays; ``children`` are every live descendant.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_KB = 1024
MB = 1_000_000  # every figure in MB is 10**6 bytes (memory too: /proc counts KiB)


@dataclass(frozen=True)
class CpuTimes:
    """User + system CPU seconds of a whole process and of each of its live threads."""

    process: float
    main_thread: float
    threads: dict[int, float] = field(default_factory=dict)  # other live threads by tid
    children: dict[int, float] = field(default_factory=dict)  # live descendants by pid

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        threads = {
            tid: seconds - other.threads.get(tid, 0.0) for tid, seconds in self.threads.items()
        }
        children = {
            pid: seconds - other.children.get(pid, 0.0) for pid, seconds in self.children.items()
        }
        return CpuTimes(
            self.process - other.process, self.main_thread - other.main_thread, threads, children
        )

    @property
    def helpers(self) -> float:
        """CPU of the live descendant processes (worker processes, row helpers)."""
        return sum(self.children.values())

    @property
    def tree(self) -> float:
        """CPU of the whole service: the process and its live descendants."""
        return self.process + self.helpers

    @property
    def other_threads(self) -> float:
        """CPU of every thread but the main one (SQLite driver thread, thread pool)."""
        return self.process - self.main_thread

    @property
    def busiest_other_thread(self) -> float:
        """CPU of the busiest live thread other than the main one."""
        return max(self.threads.values(), default=0.0)


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(f"{key} not in /proc/{pid}/status")


def rss_bytes(pid: int) -> int:
    """Resident memory right now (VmRSS)."""
    return _status_kb(pid, "VmRSS") * _KB


def peak_rss_bytes(pid: int) -> int:
    """Peak resident memory since start or the last ``reset_peak_rss`` (VmHWM)."""
    return _status_kb(pid, "VmHWM") * _KB


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux ``clear_refs`` 5); False when not permitted."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _stat_seconds(path: Path) -> float:
    # The command name may contain spaces or parentheses: split after its closing ")".
    fields = path.read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / _TICKS


def cpu_times(pid: int) -> CpuTimes:
    """utime + stime of the process (all threads, live and exited) and of each live thread."""
    threads: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name != str(pid):
            try:
                threads[int(task.name)] = _stat_seconds(task / "stat")
            except OSError:
                continue  # the thread ended meanwhile
    children: dict[int, float] = {}
    for child in child_pids(pid):
        try:
            children[child] = _stat_seconds(Path(f"/proc/{child}/stat"))
        except OSError:
            continue  # it ended meanwhile
    return CpuTimes(
        process=_stat_seconds(Path(f"/proc/{pid}/stat")),
        main_thread=_stat_seconds(Path(f"/proc/{pid}/task/{pid}/stat")),
        threads=threads,
        children=children,
    )


def child_pids(pid: int) -> list[int]:
    """The live descendant processes of ``pid`` (the service's worker processes and their
    row helpers)."""
    found: set[int] = set()
    parents = [pid]
    while parents:
        parent = parents.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue  # it ended meanwhile
        for task in tasks:
            try:
                children = {int(child) for child in (task / "children").read_text().split()}
            except OSError:
                continue
            parents.extend(children - found)
            found.update(children)
    return sorted(found)


def rss_tree_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its live descendants right now, added up."""
    total = rss_bytes(pid)
    for child in child_pids(pid):
        try:
            total += rss_bytes(child)
        except (OSError, KeyError):
            continue
    return total


def peak_rss_tree_bytes(pid: int) -> int:
    """The peak resident memory of ``pid`` and of each live descendant, added up (at
    least the peak of the sum)."""
    return peak_rss_bytes(pid) + helpers_peak_rss_bytes(pid)


def reset_peak_rss_tree(pid: int) -> bool:
    """``reset_peak_rss`` for ``pid`` and each live descendant."""
    done = reset_peak_rss(pid)
    for child in child_pids(pid):
        done = reset_peak_rss(child) and done
    return done


def helpers_peak_rss_bytes(pid: int) -> int:
    """The peak resident memory of the live descendant processes of ``pid``, added up."""
    total = 0
    for child in child_pids(pid):
        try:
            total += peak_rss_bytes(child)
        except (OSError, KeyError):
            continue
    return total


class RssSampler(threading.Thread):
    """Samples the VmRSS of a process and its descendants, added up, every ``interval``
    seconds until stopped; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.002) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self._pid = pid
        self._interval = interval
        self._done = threading.Event()
        self.peak = 0
        self.samples = 0

    def run(self) -> None:
        """Thread body."""
        while not self._done.is_set():
            try:
                self.peak = max(self.peak, rss_tree_bytes(self._pid))
            except (OSError, KeyError):
                return
            self.samples += 1
            self._done.wait(self._interval)

    def stop(self) -> int:
        """Stop sampling and return the peak RSS seen."""
        self._done.set()
        self.join()
        return self.peak
