"""The user's side: upload a file over HTTP, poll its status until it is final, export it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks import procfs
from benchmarks.operations import BENCH_ROWS
from benchmarks.procfs import CpuTimes
from benchmarks.profilers import Profiler
from benchmarks.service import Service, ServiceError

TERMINAL = frozenset({"Completed", "CompletedWithErrors", "Failed", "Cancelled"})
CONTENT_TYPES = {
    ".csv": "text/csv",
    ".jsonl": "application/x-ndjson",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
POLL_INTERVAL = 0.05
RUN_TIMEOUT = 900.0
UPLOAD_TIMEOUT = httpx.Timeout(300.0, connect=10.0)


@dataclass(frozen=True)
class Sample:
    """One status poll: seconds since upload start, rows processed, service RSS bytes."""

    seconds: float
    processed: int
    rss: int


@dataclass(frozen=True)
class Download:
    """One streamed export: its size, its lines, and the time from request to last byte."""

    size: int  # bytes
    lines: int
    seconds: float
    first_byte_seconds: float


@dataclass
class Run:
    """One operation from upload start to final status, seen from outside the service."""

    operation_id: str
    upload_seconds: float
    wall_seconds: float
    status: dict[str, Any]
    cpu: CpuTimes
    peak_rss: int  # of the whole service (HTTP process and descendants), added up
    helpers_peak_rss: int = 0  # the service's worker processes and row helpers, added up
    samples: list[Sample] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows the service processed."""
        return int(self.status.get("processedRows", 0))

    @property
    def rows_per_second(self) -> float:
        """Rows processed per second of wall time (upload start to final status)."""
        return self.rows / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def rss_when(self, rows: int) -> int | None:
        """RSS at the first poll that saw at least ``rows`` rows processed."""
        return next((s.rss for s in self.samples if s.processed >= rows), None)


def upload(
    client: httpx.Client,
    url: str,
    path: Path,
    operation: str = BENCH_ROWS,
    fields: Mapping[str, str] | None = None,
) -> str:
    """POST the file as multipart, like the README's curl, with any other form ``fields``;
    return the operation id."""
    content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
    with path.open("rb") as fh:
        response = client.post(
            f"{url}/api/bulks",
            data={"operationName": operation, "metadata": "{}", **(fields or {})},
            files={"file": (path.name, fh, content_type)},
            timeout=UPLOAD_TIMEOUT,
        )
    if response.status_code != 201:
        raise ServiceError(f"upload answered {response.status_code}: {response.text[:500]}")
    return str(response.json()["operationId"])


def run_to_end(
    service: Service,
    path: Path,
    *,
    on_uploaded: Callable[[str], None] | None = None,
    profiler: Profiler | None = None,
    timeout: float = RUN_TIMEOUT,
    operation: str = BENCH_ROWS,
    fields: Mapping[str, str] | None = None,
) -> Run:
    """Upload ``path`` and poll until a final status, sampling the service's RSS each poll.

    ``on_uploaded`` is called with the operation id as soon as the upload is answered; the
    ``profiler`` runs from just before the upload to the final status. ``operation`` names
    the operation to create (``bench-rows`` unless said), ``fields`` other form fields.
    """
    with httpx.Client() as client:
        cpu_before = service.cpu()
        if profiler is not None:
            profiler.start(service.pid)
        start = time.perf_counter()
        operation_id = upload(client, service.url, path, operation, fields)
        uploaded = time.perf_counter() - start
        if on_uploaded is not None:
            on_uploaded(operation_id)
        samples: list[Sample] = []
        status: dict[str, Any] = {}
        while status.get("status") not in TERMINAL:
            if time.perf_counter() - start > timeout:
                raise ServiceError(f"operation not finished in {timeout:.0f} s: {status}")
            time.sleep(POLL_INTERVAL)
            response = client.get(f"{service.url}/api/bulks/{operation_id}/status")
            response.raise_for_status()
            status = response.json()
            now = time.perf_counter() - start
            samples.append(Sample(now, int(status["processedRows"]), service.rss()))
        wall = time.perf_counter() - start
        if profiler is not None:
            profiler.stop(service.pid)
        return Run(
            operation_id=operation_id,
            upload_seconds=uploaded,
            wall_seconds=wall,
            status=status,
            cpu=service.cpu() - cpu_before,
            peak_rss=service.peak_rss(),
            helpers_peak_rss=procfs.helpers_peak_rss_bytes(service.pid),
            samples=samples,
        )


def download_export(
    client: httpx.Client, url: str, operation_id: str, params: dict[str, str]
) -> Download:
    """Stream ``GET /api/bulks/{id}/export`` to the end, counting bytes and lines as they
    come; the body is never held."""
    size = lines = 0
    first_byte: float | None = None
    start = time.perf_counter()
    with client.stream(
        "GET", f"{url}/api/bulks/{operation_id}/export", params=params, timeout=UPLOAD_TIMEOUT
    ) as response:
        if response.status_code != 200:
            response.read()
            raise ServiceError(f"export answered {response.status_code}: {response.text[:500]}")
        for chunk in response.iter_bytes():
            if first_byte is None:
                first_byte = time.perf_counter() - start
            size += len(chunk)
            lines += chunk.count(b"\n")
    seconds = time.perf_counter() - start
    return Download(size, lines, seconds, seconds if first_byte is None else first_byte)
