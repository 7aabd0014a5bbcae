"""The HTTP process's side of ``serve``'s worker processes: start, watch, restart, stop.

Like the ``--workers`` of gunicorn and uvicorn, with the roles turned round: the process
that answers HTTP stays, and the processing runs in ``count`` worker processes beside it
(``bulkops.supervisor.child``). Each gets what it needs on its stdin (``lifeline``): the
settings, the directory of the wake-up sockets (``SocketWakeUps``: on SQLite the
processes tell each other of new work and signals through it; PostgreSQL carries them
itself) and, through ``PROMETHEUS_MULTIPROC_DIR``, the directory of its metrics files.
Both directories are in one private temporary directory, removed when ``serve`` stops.

A worker process that dies is started again (at once the first time, then after a delay
that grows while it keeps dying young); what it held is taken over by the others at once.
``start`` returns once every worker process is processing (or ``READY_TIMEOUT`` passed),
so that ``serve`` answers requests once its operations can be processed, as a single
process does. ``stop`` sends SIGTERM to all and waits for them to drain
(``BULKOPS_SHUTDOWN_TIMEOUT``, plus ``STOP_GRACE``), killing the ones still running after
that. Each runs in a session of its own, so a Ctrl-C at a terminal reaches ``serve``
alone, which then stops them in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from bulkops.observability.metrics import Metrics
from bulkops.settings import Settings
from bulkops.storage.wakeups import SocketWakeUps
from bulkops.supervisor.lifeline import Assignment, encode

log = logging.getLogger("bulkops")

READY_TIMEOUT = 120.0  # seconds start waits for the worker processes to be processing
READY_POLL = 0.02
STOP_GRACE = 10.0  # seconds beyond the shutdown timeout before a worker process is killed
RESTART_DELAY = 0.5  # the first delay before a process that keeps dying young is restarted
MAX_RESTART_DELAY = 10.0
YOUNG = 10.0  # seconds: a process that died younger than this counts as dying young
CHILD = "bulkops.supervisor.child"
PREFIX = "bulkops-serve-"  # then serve's process id: bulkops-serve-<pid>-<random>


class WorkerProcesses:
    """``count`` worker processes processing operations for ``serve``'s HTTP process.

    Example:
        processes = WorkerProcesses(settings, 2)
        app = create_app(settings=settings, processes=processes)  # started by its lifespan
    """

    def __init__(self, settings: Settings, count: int) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self.count = count
        self._settings = _worker_settings(settings)
        _remove_left_behind()
        self._root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        self.metrics_directory = self._root / "metrics"
        self._wakeups_directory = self._root / "wakeups"
        self._ready_directory = self._root / "ready"
        for directory in (self.metrics_directory, self._wakeups_directory, self._ready_directory):
            directory.mkdir()
        self.wakeups = SocketWakeUps(self._wakeups_directory)
        self._processes: dict[int, asyncio.subprocess.Process] = {}  # by index
        self._keepers: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    @property
    def pids(self) -> list[int]:
        """The process ids of the worker processes running now."""
        return [p.pid for p in self._processes.values() if p.returncode is None]

    async def start(self) -> None:
        """Start every worker process (and keep them running until ``stop``), and wait
        until they are processing."""
        for index in range(1, self.count + 1):
            process = await self._spawn(index)
            self._keepers.append(asyncio.create_task(self._keep(index, process)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT
        while not self._all_ready():
            if loop.time() > deadline:
                log.warning("Worker processes not ready in %g s; serving anyway", READY_TIMEOUT)
                break
            await asyncio.sleep(READY_POLL)
        log.info("%d worker processes started (pids %s)", self.count, self.pids)

    def _all_ready(self) -> bool:
        ready = set(os.listdir(self._ready_directory))
        return all(str(p.pid) in ready for p in self._processes.values())

    async def stop(self) -> None:
        """Let every worker process drain, kill the ones that take too long, and remove
        the temporary directory."""
        self._stopping.set()
        running = [p for p in self._processes.values() if p.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = self._settings.shutdown_timeout + STOP_GRACE
        try:
            async with asyncio.timeout(deadline):
                await asyncio.gather(*(p.wait() for p in running))
        except TimeoutError:
            for process in running:
                if process.returncode is None:
                    log.warning("Worker process %s did not stop in time: killed", process.pid)
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            await asyncio.gather(*(p.wait() for p in running))
        for keeper in self._keepers:
            keeper.cancel()
        await asyncio.gather(*self._keepers, return_exceptions=True)
        self.remove()

    def remove(self) -> None:
        """Remove the temporary directory (idempotent)."""
        shutil.rmtree(self._root, ignore_errors=True)

    async def _spawn(self, index: int) -> asyncio.subprocess.Process:
        name = f"worker-{index}"
        assignment = Assignment(
            name, self._settings, self._wakeups_directory, self._ready_directory, os.getpid()
        )
        # The child's prometheus-client reads this when it is imported, before any code of
        # ours runs there: it can only come through the environment.
        environment = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(self.metrics_directory))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD,
            stdin=asyncio.subprocess.PIPE,
            env=environment,
            start_new_session=True,
        )
        assert process.stdin is not None
        process.stdin.write(encode(assignment))  # the pipe stays open while serve lives
        with contextlib.suppress(ConnectionError):
            await process.stdin.drain()
        self._processes[index] = process
        return process

    async def _keep(self, index: int, process: asyncio.subprocess.Process) -> None:
        """Restart the worker process ``index`` whenever it dies, until ``stop``."""
        loop = asyncio.get_running_loop()
        dying_young = 0
        while True:
            started = loop.time()
            code = await process.wait()
            Metrics.forget(self.metrics_directory, process.pid)
            if process.stdin is not None:
                process.stdin.close()
            if self._stopping.is_set():
                return
            dying_young = dying_young + 1 if loop.time() - started < YOUNG else 0
            delay = 0.0 if dying_young <= 1 else RESTART_DELAY * 2 ** (dying_young - 2)
            delay = min(delay, MAX_RESTART_DELAY)
            log.warning(
                "Worker process worker-%d (pid %d) exited with code %s; restarting it%s",
                index,
                process.pid,
                code,
                f" in {delay:g} s" if delay else "",
            )
            if delay:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._stopping.wait()
                if self._stopping.is_set():
                    return
            process = await self._spawn(index)


def _worker_settings(settings: Settings) -> Settings:
    """The settings of a worker process: the HTTP process applied the migrations, and row
    helpers (helper processes of one worker) are only started when asked for: the worker
    processes are the ones that use the cores."""
    update: dict[str, object] = {"migrate_on_start": False}
    if "row_helpers" not in settings.model_fields_set:
        update["row_helpers"] = 0
    return settings.model_copy(update=update)


def _remove_left_behind() -> None:
    """Remove the temporary directories of earlier serves that were killed (a kill -9
    leaves no time to remove them), recognised by a process id that no longer runs."""
    root = Path(tempfile.gettempdir())
    for path in root.glob(f"{PREFIX}*-*"):
        pid = path.name.removeprefix(PREFIX).split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
