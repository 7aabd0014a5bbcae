"""Profiling the service during a run: cProfile inside the process, or py-spy outside it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from benchmarks.breakdown import Breakdown, from_cprofile
from benchmarks.sampling import from_pyspy

CPROFILE, PYSPY = "cprofile", "py-spy"
PYSPY_RATE = 100  # samples a second


class Profiler(Protocol):
    """Switched on just before the upload and off at the final status."""

    name: str
    output: Path

    def command(self) -> list[str] | None:
        """The service command to use instead of the plain one, if any."""

    def start(self, pid: int) -> None:
        """Begin profiling the service."""

    def stop(self, pid: int) -> None:
        """End profiling and wait for the output file."""

    def analyse(self) -> Breakdown:
        """The output grouped by function family."""


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the profiler wrote no {path.name} in {timeout:.0f} s")
        time.sleep(0.05)


class CProfiler:
    """cProfile in the service's main thread (``benchmarks.profiled_serve``), toggled by
    SIGUSR1/SIGUSR2. Deterministic, but roughly doubles the cost of Python calls."""

    name = CPROFILE

    def __init__(self, directory: Path) -> None:
        self.output = directory / "service.prof"

    def command(self) -> list[str] | None:
        """``python -m benchmarks.profiled_serve OUT``."""
        return [sys.executable, "-m", "benchmarks.profiled_serve", str(self.output)]

    def start(self, pid: int) -> None:
        """Switch cProfile on."""
        os.kill(pid, signal.SIGUSR1)

    def stop(self, pid: int) -> None:
        """Switch it off; the service saves the statistics."""
        os.kill(pid, signal.SIGUSR2)
        _wait_for(self.output, 60)

    def analyse(self) -> Breakdown:
        """Group the statistics."""
        return from_cprofile(self.output)


def find_pyspy() -> str | None:
    """The py-spy executable on PATH or beside this Python, if installed."""
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


class PySpy:
    """py-spy sampling the unmodified service from outside (``pip install py-spy``):
    negligible overhead, sees time spent in C code and idle time as it is."""

    name = PYSPY

    def __init__(self, directory: Path) -> None:
        self.output = directory / "service.pyspy.txt"
        executable = find_pyspy()
        if executable is None:
            raise RuntimeError("py-spy is not installed (pip install py-spy)")
        self._executable = executable
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str] | None:
        """The plain service."""
        return None

    def start(self, pid: int) -> None:
        """Attach py-spy."""
        # --subprocesses: serve's worker processes (and row helpers) do the processing.
        options = [
            "--rate",
            str(PYSPY_RATE),
            "--format",
            "raw",
            "--threads",
            "--idle",
            "--subprocesses",
        ]
        self._process = subprocess.Popen(
            [self._executable, "record", "--pid", str(pid), *options, "--output", str(self.output)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self, pid: int) -> None:
        """Detach; py-spy writes its samples on SIGINT."""
        if self._process is None:
            return
        self._process.send_signal(signal.SIGINT)
        _, errors = self._process.communicate(timeout=60)
        if not self.output.exists():
            raise RuntimeError(f"py-spy wrote nothing: {errors.decode(errors='replace')[-500:]}")

    def analyse(self) -> Breakdown:
        """Group the samples."""
        return from_pyspy(self.output, PYSPY_RATE)


def make_profiler(name: str, directory: Path) -> Profiler:
    """A profiler by name, writing into ``directory``."""
    if name == PYSPY:
        return PySpy(directory)
    return CProfiler(directory)
