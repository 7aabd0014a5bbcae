"""The gateway conformance run: the instance's HTTP tests against a gateway in front of two
real ``bulkops serve`` processes that share the test operations between them.

Starting processes is mostly Python imports, so a pair of backends is started once per
configuration (operations and settings) and kept for the run; between tests it waits until
nothing is processing and empties its storage (every table, every stored file), which is
what a fresh backend would start with. Configurations whose state lives in the process (an
in-memory store) get fresh processes each time. The gateway itself is new for every test
(so its id cache and event log start empty), served by uvicorn on a loopback port.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import bulkops as bo
from bulkops.definition.operation import definition_of
from tests.e2e.conftest import Process, free_port, wait_ready
from tests.gateway.loopback import LoopbackServer

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("one", "two")
READY_TIMEOUT = 180  # seconds; starting processes on a busy 2-core machine is slow
IDLE_TIMEOUT = 30
# Settings of the gateway itself (the same variables as an instance's); the rest go to the
# backends.
GATEWAY_SETTINGS = {"cors_origins", "openapi_enabled"}
BUSY = {"Pending", "Running", "Retrying"}


def split(operations: Sequence[type]) -> list[list[type]]:
    """The operations dealt out to the backends by name, alternately (none empty)."""

    def name(cls: type) -> str:
        definition = definition_of(cls)
        assert definition is not None, f"{cls!r} is not an operation"
        return definition.name.casefold()

    ordered = sorted(operations, key=name)
    groups = [ordered[i :: len(BACKENDS)] for i in range(len(BACKENDS))]
    return [group for group in groups if group]


def setting_value(value: Any) -> str:
    """A setting as a ``BULKOPS_*`` variable spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


class BackendPair:
    """Two ``bulkops serve`` processes under ``directory``, with their own storage."""

    def __init__(
        self, directory: Path, operations: Sequence[type], settings: dict[str, Any]
    ) -> None:
        self.directory = directory
        self.urls: dict[str, str] = {}
        self.processes: list[Process] = []
        self._api_only = settings.get("role") == "api"
        directory.mkdir(parents=True, exist_ok=True)
        variables = {f"BULKOPS_{k.upper()}": setting_value(v) for k, v in settings.items()}
        for name, group in zip(BACKENDS, split(operations), strict=False):
            modules = directory / f"{name}_operations.py"
            modules.write_text(
                "".join(f"from {cls.__module__} import {cls.__qualname__}\n" for cls in group)
            )
            port = free_port()
            env = {
                "BULKOPS_OPERATIONS": str(modules),
                "BULKOPS_DATABASE_URL": f"sqlite:///{self._database(name)}",
                "BULKOPS_FILES_URL": f"file://{self._files(name)}",
                "BULKOPS_FLUSH_INTERVAL": "0.05",
                "BULKOPS_SHUTDOWN_TIMEOUT": "2",
                "BULKOPS_PORT": str(port),
                **variables,
            }
            self.processes.append(Process(["serve"], _environment(env), directory / f"{name}.log"))
            self.urls[name] = f"http://127.0.0.1:{port}"
        with ThreadPoolExecutor(max_workers=len(self.processes)) as pool:
            waits = [
                pool.submit(wait_ready, process, url, READY_TIMEOUT)
                for process, url in zip(self.processes, self.urls.values(), strict=True)
            ]
            for wait in waits:
                wait.result()

    def empty(self) -> None:
        """Wait until nothing is processing, then remove every record and stored file."""
        deadline = time.monotonic() + IDLE_TIMEOUT
        while not self._idle():
            if time.monotonic() > deadline:
                raise AssertionError(f"backends still busy after {IDLE_TIMEOUT} s")
            time.sleep(0.05)
        for name in self.urls:
            with sqlite3.connect(self._database(name), timeout=30) as db:
                tables = [
                    row[0]
                    for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                    if row[0] not in ("alembic_version", "sqlite_sequence")
                ]
                for table in tables:
                    db.execute(f'DELETE FROM "{table}"')
            files = self._files(name)
            if files.exists():
                shutil.rmtree(files)

    def stop(self) -> None:
        """Stop both processes (gracefully, in parallel; then by force)."""
        for process in self.processes:
            if process.popen.poll() is None:
                process.signal(signal.SIGTERM)
        for process in self.processes:
            process.stop()

    def _idle(self) -> bool:
        for url in self.urls.values():
            items = httpx.get(f"{url}/api/bulks?pageSize=1000", timeout=30).json()["items"]
            busy = BUSY - {"Pending"} if self._api_only else BUSY
            if any(item["status"] in busy for item in items):
                return False
        return True

    def _database(self, name: str) -> Path:
        return self.directory / f"{name}.sqlite"

    def _files(self, name: str) -> Path:
        return self.directory / f"files-{name}"


def _environment(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
    env.update(settings)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class BackendPool:
    """Backend pairs by configuration, kept for the whole run."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._pairs: dict[tuple[Any, ...], BackendPair] = {}
        self._spent: list[BackendPair] = []

    def pair(self, operations: Sequence[type], settings: dict[str, Any]) -> BackendPair:
        """Backends serving ``operations`` with ``settings``, with empty storage."""
        in_process_state = settings.get("event_store") == "memory"
        key = (
            tuple(f"{c.__module__}.{c.__qualname__}" for c in operations),
            tuple(sorted((k, setting_value(v)) for k, v in settings.items())),
        )
        found = self._pairs.get(key)
        if found is not None and not in_process_state:
            found.empty()
            return found
        directory = self._directory / f"pair{len(self._pairs) + len(self._spent) + 1}"
        created = BackendPair(directory, operations, settings)
        if found is not None:
            self._spent.append(found)
        self._pairs[key] = created
        return created

    def close(self) -> None:
        """Stop every backend."""
        for pair in [*self._pairs.values(), *self._spent]:
            pair.stop()


@pytest.fixture(scope="session")
def backend_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackendPool]:
    """Backend processes shared by the tests of the conformance run."""
    pool = BackendPool(tmp_path_factory.mktemp("gateway-backends"))
    try:
        yield pool
    finally:
        pool.close()


@asynccontextmanager
async def gateway_clients(
    pool: BackendPool, default_operations: Sequence[type]
) -> AsyncIterator[Callable[..., Awaitable[httpx.AsyncClient]]]:
    """``make(operations=None, **settings) -> client`` of a new gateway over pooled backends,
    like the in-process client factory; the gateways are stopped on exit."""
    async with AsyncExitStack() as stack:

        async def make(
            operations: Sequence[type] | None = None, **overrides: Any
        ) -> httpx.AsyncClient:
            backend_settings = {k: v for k, v in overrides.items() if k not in GATEWAY_SETTINGS}
            gateway_settings = {k: v for k, v in overrides.items() if k in GATEWAY_SETTINGS}
            pair = await asyncio.to_thread(
                pool.pair, list(operations or default_operations), backend_settings
            )
            app = bo.create_gateway(pair.urls, bo.GatewaySettings(**gateway_settings))
            server = LoopbackServer(app)
            url = await server.start()
            stack.push_async_callback(server.stop)
            client = httpx.AsyncClient(base_url=url, timeout=30)
            await stack.enter_async_context(client)
            return client

        yield make
