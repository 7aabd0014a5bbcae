"""Real bulkops processes on loopback ports, stopped at the end of each test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).parent
TERMINAL = {"Completed", "CompletedWithErrors", "Failed", "Cancelled"}

pytestmark = pytest.mark.e2e
E2E_TIMEOUT = 300  # processes start slowly on a loaded machine; deadlines inside stay tight
# The process counts of a one-core machine: one worker process beside serve's HTTP process,
# rows run in the event loop (no row helpers). A test marked ``one_core`` (one about what its
# processes answer, not about the processes themselves) starts its commands with these unless
# it sets them; every other test gets this machine's defaults.
ONE_CORE = {"BULKOPS_WORKER_PROCESSES": "1", "BULKOPS_ROW_HELPERS": "0"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give tests that start processes more time than the suite's default."""
    for item in items:
        if HERE in Path(str(item.fspath)).parents and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """A running ``bulkops`` command with its log file."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        log: Path,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.args = args
        self.log = log
        self._log_handle = log.open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bulkops", *args],
            env=env,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
        )

    def output(self) -> str:
        """What the process printed so far."""
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        """Send a signal (SIGTERM for a graceful stop, SIGKILL for a crash)."""
        self.popen.send_signal(sig)

    def wait(self, timeout: float = 30) -> int:
        """Wait for exit and return the exit code."""
        return self.popen.wait(timeout=timeout)

    def stop(self) -> None:
        """Stop gracefully, killing after a grace period."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._log_handle.close()


class Spawner:
    """``spawner(*args, **env_overrides) -> Process`` starts a ``bulkops`` command; ``stop()``
    stops every one it started.

    Its processes share a SQLite file and a file directory under ``directory``.
    """

    def __init__(self, directory: Path, *, one_core: bool = False) -> None:
        self.directory = directory
        self.started: list[Process] = []
        self.base_env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
        self.base_env.update(
            {
                "BULKOPS_DATABASE_URL": f"sqlite:///{directory}/shared.db",
                "BULKOPS_FILES_URL": f"file://{directory}/files",
                "BULKOPS_OPERATIONS": f"bulkops.examples.operations,{HERE / 'e2e_operations.py'}",
                "BULKOPS_FLUSH_INTERVAL": "0.1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if one_core:
            self.base_env.update(ONE_CORE)

    def __call__(
        self, *args: str, preexec: Callable[[], None] | None = None, **env: Any
    ) -> Process:
        full_env = dict(self.base_env)
        full_env.update({f"BULKOPS_{k.upper()}": str(v) for k, v in env.items()})
        log = self.directory / f"process-{len(self.started)}.log"
        process = Process(list(args), full_env, log, preexec)
        self.started.append(process)
        return process

    def stop(self) -> None:
        """Stop every process started, in the order they were."""
        for process in self.started:
            process.stop()


def _one_core(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("one_core") is not None


@pytest.fixture
def spawn(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Process]]:
    """Returns ``spawn(*args, **env_overrides) -> Process``; all are stopped afterwards.

    Every process of one test shares a SQLite file and a file directory under tmp_path.
    """
    spawner = Spawner(tmp_path, one_core=_one_core(request))
    yield spawner
    spawner.stop()


@pytest.fixture(scope="module")
def module_spawn(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Spawner]:
    """``spawn`` for the processes a module's tests share (started once, stopped after the
    module's last test): for tests that each leave the service as they found it."""
    spawner = Spawner(tmp_path_factory.mktemp("module"), one_core=_one_core(request))
    yield spawner
    spawner.stop()


def wait_ready(process: Process, url: str, timeout: float = 120) -> None:
    """Poll /health/live until the server answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise AssertionError(f"process exited early:\n{process.output()}")
        try:
            if httpx.get(f"{url}/health/live", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"server not ready:\n{process.output()}")


def serve(spawn: Callable[..., Process], *args: str, **env: Any) -> tuple[Process, str]:
    """Start ``bulkops serve`` on a free port and wait until it answers (``preexec`` runs in
    the child before it starts, e.g. to set resource limits)."""
    port = free_port()
    process = spawn("serve", "--port", str(port), *args, **env)
    url = f"http://127.0.0.1:{port}"
    wait_ready(process, url)
    return process, url


def wait_for(
    predicate: Callable[[], bool],
    *,
    timeout: float = 30,
    what: str = "condition",
    detail: Callable[[], str] | None = None,
) -> None:
    """Poll a predicate with a deadline; on timeout the error ends with ``detail()``'s
    last lines (a process's output, say)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            tail = "\n" + detail()[-4000:] if detail is not None else ""
            raise AssertionError(f"timed out waiting for {what}{tail}")
        time.sleep(0.05)


def status_of(url: str, operation_id: str) -> dict[str, Any]:
    """GET the status view."""
    body: dict[str, Any] = httpx.get(f"{url}/api/bulks/{operation_id}/status").json()
    return body


def wait_terminal(
    url: str,
    operation_id: str,
    timeout: float = 60,
    detail: Callable[[], str] | None = None,
) -> dict[str, Any]:
    """Poll the status until terminal (``detail`` as for ``wait_for``)."""
    found: dict[str, Any] = {}

    def done() -> bool:
        found.update(status_of(url, operation_id))
        if found.get("status") not in TERMINAL:
            return False
        # The feed is written just after the status: wait for the terminal event too.
        events = httpx.get(f"{url}/api/bulks/{operation_id}/events?limit=1").json()
        return bool(events) and events[-1]["type"] in ("Completed", "Failed", "Cancelled")

    wait_for(done, timeout=timeout, what=f"{operation_id} to finish", detail=detail)
    return found
