"""A real ``bulkops serve`` process on a free loopback port, with its own data directory.

``serve`` runs at its defaults, as a user gets it: its worker processes (one per core) do
the processing beside the HTTP process, and the memory and CPU readings add them up.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from benchmarks import procfs

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = Path(__file__).resolve().with_name("operations.py")
HOST = "127.0.0.1"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class ServiceError(RuntimeError):
    """The service did not start, or misbehaved."""


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def service_env(data_dir: Path, port: int, max_row_concurrency: int) -> dict[str, str]:
    """The environment of a service: SQLite + local files in ``data_dir``, no upload limit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
    env.update(
        {
            "BULKOPS_DATABASE_URL": f"sqlite:///{data_dir / 'bulkops.db'}",
            "BULKOPS_FILES_URL": f"file://{data_dir / 'files'}",
            "BULKOPS_OPERATIONS": str(OPERATIONS),
            "BULKOPS_HOST": HOST,
            "BULKOPS_PORT": str(port),
            "BULKOPS_MAX_ROW_CONCURRENCY": str(max_row_concurrency),
            "BULKOPS_MAX_UPLOAD_BYTES": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


class Service:
    """``python -m bulkops serve``, or ``command`` (e.g. the same under a profiler).

    Use as a context manager: the process is started on entry and stopped on exit.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        max_row_concurrency: int = 1,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self._command = command or [sys.executable, "-m", "bulkops", "serve"]
        self._env = service_env(data_dir, self.port, max_row_concurrency)
        self._env.update(env or {})
        self._log_path = data_dir / "service.log"
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The service's process id."""
        if self._popen is None:
            raise ServiceError("service not started")
        return self._popen.pid

    def start(self) -> None:
        """Start the process and wait until ``/health/live`` answers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("wb") as log:
            self._popen = subprocess.Popen(
                self._command, cwd=ROOT, env=self._env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._popen.poll() is not None:
                raise ServiceError(f"service exited at start:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health/live", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise ServiceError(f"service not ready in {READY_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL when it has not exited within the grace period."""
        if self._popen is None or self._popen.poll() is not None:
            return
        self._popen.send_signal(signal.SIGTERM)
        try:
            self._popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait(timeout=STOP_TIMEOUT)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines the service printed."""
        text = self._log_path.read_text(errors="replace") if self._log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def rss(self) -> int:
        """Resident bytes now, of the service's processes added up."""
        return procfs.rss_tree_bytes(self.pid)

    def peak_rss(self) -> int:
        """Peak resident bytes (VmHWM) of the service's processes, added up."""
        return procfs.peak_rss_tree_bytes(self.pid)

    def reset_peak_rss(self) -> bool:
        """Reset the peaks of the service's processes (False when not permitted)."""
        return procfs.reset_peak_rss_tree(self.pid)

    def cpu(self) -> procfs.CpuTimes:
        """CPU seconds so far: of the HTTP process, and of each live descendant."""
        return procfs.cpu_times(self.pid)

    def __enter__(self) -> Service:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
