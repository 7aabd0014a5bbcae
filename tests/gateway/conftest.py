"""Gateway tests: real bulkops backends and the gateway, each served by uvicorn on a free
loopback port inside the test process; backends can be made slow, failing or absent."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import bulkops as bo
from tests.gateway import gateway_operations as gops
from tests.gateway.loopback import LoopbackServer


@dataclass
class Faults:
    """ASGI middleware in front of a backend: records every request and misbehaves on demand.

    ``fail_next`` answers that many requests 503; ``delay`` holds GET requests that long
    (or until the caller leaves, which is recorded in ``abandoned``).
    """

    app: ASGIApp
    requests: list[tuple[str, str, str, dict[str, str]]] = field(default_factory=list)
    fail_next: int = 0
    delay: float = 0.0
    abandoned: list[str] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        path, query = scope["path"], scope["query_string"].decode()
        self.requests.append((scope["method"], path, query, headers))
        if self.fail_next > 0:
            self.fail_next -= 1
            await _answer(send, 503, {"error": "Injected failure"})
            return
        if self.delay and scope["method"] == "GET":
            if await _left_within(receive, self.delay):
                self.abandoned.append(path)
                return
        await self.app(scope, receive, send)

    def hits(self, path: str, method: str = "GET") -> int:
        """How many requests for ``path`` arrived."""
        return sum(1 for m, p, _, _ in self.requests if p == path and m == method)


async def _left_within(receive: Receive, seconds: float) -> bool:
    async def disconnected() -> None:
        message: Message = await receive()
        while message["type"] != "http.disconnect":
            message = await receive()

    try:
        await asyncio.wait_for(disconnected(), seconds)
    except TimeoutError:
        return False
    return True


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": payload})


@dataclass
class BackendServer:
    """A bulkops instance behind ``Faults`` on a loopback port."""

    name: str
    url: str
    faults: Faults
    server: LoopbackServer

    def client(self) -> httpx.AsyncClient:
        """A client that talks to this backend directly."""
        return httpx.AsyncClient(base_url=self.url, timeout=30)

    async def stop(self) -> None:
        """Take the backend away: its port refuses connections from now on."""
        await self.server.stop()


BackendFactory = Callable[..., Awaitable[BackendServer]]
GatewayFactory = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def make_backend(tmp_path: Path) -> AsyncIterator[BackendFactory]:
    """Returns ``make(name, operations=None, **settings)``: a combined instance serving
    ``operations`` (default: the test operations of that backend name)."""
    async with AsyncExitStack() as stack:

        async def make(
            name: str, operations: Sequence[type] | None = None, **overrides: Any
        ) -> BackendServer:
            values: dict[str, Any] = {
                "database_url": f"sqlite:///{tmp_path}/{name}.sqlite",
                "files_url": f"file://{tmp_path}/files-{name}",
                "flush_interval": 0.05,
                "service_name": f"service-{name}",
                "shutdown_timeout": 1,
                "max_row_concurrency": 4,
            }
            values.update(overrides)
            app = bo.create_app(operations or gops.SERVED[name], bo.Settings(**values))
            faults = Faults(app)
            server = LoopbackServer(faults)
            url = await server.start()
            stack.push_async_callback(server.stop)
            return BackendServer(name, url, faults, server)

        yield make


@pytest.fixture
async def make_gateway() -> AsyncIterator[GatewayFactory]:
    """Returns ``make(backends, outgoing=(), **settings)``: a client of a gateway served on a
    loopback port over ``backends`` (BackendServers, or a name -> URL mapping)."""
    async with AsyncExitStack() as stack:

        async def make(
            backends: Sequence[BackendServer] | dict[str, str],
            outgoing: Sequence[Any] = (),
            **overrides: Any,
        ) -> httpx.AsyncClient:
            urls = backends if isinstance(backends, dict) else {b.name: b.url for b in backends}
            settings = bo.GatewaySettings(**overrides)
            app = bo.create_gateway(urls, settings, outgoing)
            server = LoopbackServer(app)
            url = await server.start()
            stack.push_async_callback(server.stop)
            client = httpx.AsyncClient(base_url=url, timeout=30)
            await stack.enter_async_context(client)
            client.gateway = app.state.gateway  # type: ignore[attr-defined]
            return client

        yield make


@pytest.fixture
async def trio(make_backend: BackendFactory) -> list[BackendServer]:
    """Backends a, b and c, each serving its own operations."""
    return [await make_backend(name) for name in ("a", "b", "c")]


async def create(
    client: httpx.AsyncClient, operation: str, content: str = "name\nx\n", **extra: str
) -> str:
    """Create an operation and return its id, failing the test on any other answer."""
    response = await client.post(
        "/api/bulks",
        data={"operationName": operation, "metadata": "{}", **extra},
        files={"file": ("rows.csv", content.encode(), "text/csv")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


TERMINAL = {"Completed", "CompletedWithErrors", "Failed", "Cancelled"}


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], *, timeout: float = 20.0, what: str = "condition"
) -> None:
    """Poll an async predicate with a deadline."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def wait_finished(client: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    """Poll the status (and the terminal event) until the operation is finished."""
    found: dict[str, Any] = {}

    async def finished() -> bool:
        found.update((await client.get(f"/api/bulks/{operation_id}/status")).json())
        if found.get("status") not in TERMINAL:
            return False
        events = (await client.get(f"/api/bulks/{operation_id}/events?limit=1")).json()
        return bool(events) and events[-1]["type"] in ("Completed", "Failed", "Cancelled")

    await wait_until(finished, what=f"{operation_id} to finish")
    return found
