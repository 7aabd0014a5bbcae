"""HTTP through the ASGI app, on a real SQLite file and local file storage."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

import bulkops as bo
from bulkops.runtime import Runtime
from tests.integration import operations as ops

ClientFactory = Callable[..., Awaitable[httpx.AsyncClient]]

TERMINAL = {"Completed", "CompletedWithErrors", "Failed", "Cancelled"}


@pytest.fixture
async def make_client(tmp_path: Path) -> AsyncIterator[ClientFactory]:
    """Returns ``make(operations=None, **settings) -> client`` with the app's lifespan
    running; the client's ``runtime`` attribute is the app's runtime."""
    async with AsyncExitStack() as stack:
        count = 0

        async def make(
            operations: Sequence[type] | None = None, **overrides: Any
        ) -> httpx.AsyncClient:
            nonlocal count
            count += 1
            values: dict[str, Any] = {
                "database_url": f"sqlite:///{tmp_path}/db{count}.sqlite",
                "files_url": f"file://{tmp_path}/files{count}",
                "flush_interval": 0.05,
            }
            values.update(overrides)
            app = bo.create_app(operations or ops.ALL, bo.Settings(**values))
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bulkops.test"
            )
            await stack.enter_async_context(client)
            client.runtime = app.state.runtime  # type: ignore[attr-defined]
            return client

        yield make


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(request: pytest.FixtureRequest, make_client: ClientFactory) -> httpx.AsyncClient:
    """A combined instance serving the test operations, on SQLite and on PostgreSQL."""
    if request.param == "postgres":
        url = request.getfixturevalue("empty_postgres_url")
        return await make_client(database_url=url, migrate_on_start=False)
    return await make_client()


def runtime_of(client: httpx.AsyncClient) -> Runtime:
    """The runtime behind a test client."""
    runtime: Runtime = client.runtime  # type: ignore[attr-defined]
    return runtime


async def create(
    client: httpx.AsyncClient,
    content: bytes | str,
    *,
    operation: str = "record",
    metadata: dict[str, Any] | str | None = None,
    file_name: str = "rows.csv",
    content_type: str = "text/csv",
    extra: dict[str, str] | None = None,
) -> httpx.Response:
    """POST /api/bulks with a file."""
    if isinstance(content, str):
        content = content.encode()
    data = {"operationName": operation}
    if metadata is not None:
        data["metadata"] = metadata if isinstance(metadata, str) else json.dumps(metadata)
    data.update(extra or {})
    return await client.post(
        "/api/bulks", data=data, files={"file": (file_name, content, content_type)}
    )


async def create_ok(client: httpx.AsyncClient, content: bytes | str, **kwargs: Any) -> str:
    """Create and return the operation id, failing the test on any other answer."""
    kwargs.setdefault("metadata", {"requestedBy": "tests"})
    response = await create(client, content, **kwargs)
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


async def wait_status(
    client: httpx.AsyncClient,
    operation_id: str,
    statuses: set[str] | None = None,
    *,
    timeout: float = 20.0,
) -> dict[str, Any]:
    """Poll the status until it is one of ``statuses`` (default: terminal) or time runs out.

    For a terminal status it also waits for the operation's terminal event: the feed is
    written just after the status, so a reader may briefly see the status first.
    """
    wanted = statuses or TERMINAL
    deadline = time.monotonic() + timeout
    while True:
        response = await client.get(f"/api/bulks/{operation_id}/status")
        body: dict[str, Any] = response.json()
        if body.get("status") in wanted and (
            body["status"] not in TERMINAL or await _terminal_event_seen(client, operation_id)
        ):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"status stayed {body} (wanted {wanted})")
        await asyncio.sleep(0.02)


async def _terminal_event_seen(client: httpx.AsyncClient, operation_id: str) -> bool:
    events = (await client.get(f"/api/bulks/{operation_id}/events?limit=1")).json()
    return bool(events) and events[-1]["type"] in TERMINAL_EVENTS


TERMINAL_EVENTS = {"Completed", "Failed", "Cancelled"}


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], *, timeout: float = 20.0, what: str = "condition"
) -> None:
    """Poll an async predicate with a deadline."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(autouse=True)
def _reset_operations() -> None:
    ops.PROCESSED.clear()
    ops.THREADS.clear()
    ops.GATE.reset()
