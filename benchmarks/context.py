"""What every scenario of one benchmark run shares: sizes, inputs, and measured results."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from benchmarks.client import Run, run_to_end
from benchmarks.inputs import InputFiles, ensure_csv, ensure_inputs, ensure_sized_csv
from benchmarks.provenance import newest_source_change
from benchmarks.reference import ReferenceResult, measure
from benchmarks.service import Service


@dataclass(frozen=True)
class Sizes:
    """How big one mode's inputs are."""

    name: str
    rows: int  # scenarios 1, 2, 3, 6 and 7
    pipeline_rows: int  # scenario 4
    signal_rows: int  # scenario 5
    poll_seconds: float  # scenario 6
    upload_bytes: int  # scenario 8

    @property
    def checkpoint_rows(self) -> int:
        """Rows at which scenario 2 takes its early RSS reading (100,000 of 1,000,000)."""
        return max(1, self.rows // 10)


FULL = Sizes(
    "full",
    rows=1_000_000,
    pipeline_rows=20_000,
    signal_rows=1_000,
    poll_seconds=10.0,
    upload_bytes=50_000_000,
)
QUICK = Sizes(
    "quick",
    rows=20_000,
    pipeline_rows=2_000,
    signal_rows=200,
    poll_seconds=2.0,
    upload_bytes=5_000_000,
)


@dataclass
class Context:
    """Inputs are generated once per run; the reference and the plain CSV run are measured
    once and reused by the scenarios that need them.

    The service of a plain run is kept running until the context is closed (use it as a
    context manager), so a later scenario can work on the same operation in the same
    process (scenario 7 exports scenario 1's operation).
    """

    sizes: Sizes
    input_dir: Path
    profiler: str | None  # "cprofile", "py-spy", or None for no profiled runs
    profile_dir: Path | None = None  # where profiled runs leave their output
    load_at_start: list[float] = field(
        default_factory=lambda: [round(x, 2) for x in os.getloadavg()]
    )
    source_at_start: float = field(default_factory=newest_source_change)
    _inputs: InputFiles | None = None
    _references: dict[Path, ReferenceResult] = field(default_factory=dict)
    _runs: dict[Path, Run] = field(default_factory=dict)
    _run_services: dict[Path, Service] = field(default_factory=dict)
    _kept: ExitStack = field(default_factory=ExitStack)

    @property
    def inputs(self) -> InputFiles:
        """The CSV and JSON Lines files of ``sizes.rows`` rows (generated on first use)."""
        if self._inputs is None:
            self._inputs = ensure_inputs(self.input_dir, self.sizes.rows)
        return self._inputs

    def csv_of(self, rows: int) -> Path:
        """A CSV file of ``rows`` rows (the first ``rows`` people of the big one)."""
        return ensure_csv(self.input_dir, rows)

    def sized_csv(self) -> Path:
        """A CSV file of at least ``sizes.upload_bytes`` bytes."""
        return ensure_sized_csv(self.input_dir, self.sizes.upload_bytes)

    def reference(self, path: Path) -> ReferenceResult:
        """The bare loop over ``path`` (measured once per run)."""
        if path not in self._references:
            self._references[path] = measure(path)
        return self._references[path]

    def references(self) -> dict[str, ReferenceResult]:
        """Every reference measured so far, by file name."""
        return {path.name: result for path, result in self._references.items()}

    def plain_run(self, path: Path) -> Run:
        """``path`` processed by a fresh service, unprofiled (measured once per run)."""
        if path not in self._runs:
            with ExitStack() as stack:
                directory = stack.enter_context(data_dir())
                service = stack.enter_context(Service(directory))
                self._runs[path] = run_to_end(service, path)
                self._run_services[path] = service
                self._kept.push(stack.pop_all())
        return self._runs[path]

    def plain_run_service(self, path: Path) -> Service:
        """The service, still running, that did ``plain_run(path)`` (doing it if needed)."""
        self.plain_run(path)
        return self._run_services[path]

    def close(self) -> None:
        """Stop the services kept from plain runs and remove their data."""
        self._kept.close()

    def __enter__(self) -> Context:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@contextmanager
def data_dir() -> Iterator[Path]:
    """A fresh directory for one service's database and files, removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="bulkops-bench-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
