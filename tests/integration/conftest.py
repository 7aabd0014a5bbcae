"""HTTP through the ASGI app, on a real SQLite file and local file storage."""

from __future__ import annotations

import asyncio
import json
import os
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

# Gateway conformance run (BULKOPS_TEST_GATEWAY=1, started by tests/gateway/test_conformance.py):
# `make_client` and so `client` talk to a gateway in front of two real `bulkops serve`
# backends that share the test operations (tests/gateway/cluster.py). Read at import: the
# autouse fixture below clears BULKOPS_* variables for each test.
GATEWAY = os.environ.get("BULKOPS_TEST_GATEWAY") == "1"
if GATEWAY:
    from tests.gateway.cluster import backend_pool  # noqa: F401 - the run's backend processes
# Tests of the HTTP suite that reach into the in-process runtime or the operations' in-process
# state: marked in_process and left out of the gateway run.
IN_PROCESS_ONLY = {
    "test_http_create.py::test_oversize_upload_is_413_and_nothing_is_kept",
    "test_http_export.py::test_data_mode_of_an_operation_no_longer_registered_is_409",
    "test_http_export.py::test_data_csv_fix_and_reupload_round_trip",
    "test_http_export.py::test_a_large_export_streams_in_bounded_memory",
    "test_http_formats.py::test_an_xlsx_file_is_processed_in_chunks",
    "test_http_settings.py::test_storage_outage_is_503_and_not_ready",
}
# Tests of the other modules here that see the service through HTTP alone (the rest of those
# modules assert what the operations recorded in this process).
HTTP_ONLY_ELSEWHERE = {
    "test_pipelines.py::test_discovery_shows_pipelines_and_their_steps",
    "test_pipelines.py::test_signal_errors",
    "test_pipelines.py::test_signal_step_times_out",
    "test_pipelines.py::test_validation_failures_of_pipeline_rows_list_pending_steps",
    "test_processing.py::test_unreadable_file_fails_the_operation_with_a_clear_message",
    "test_processing.py::test_api_only_instance_leaves_operations_pending_and_can_cancel_them",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the in-process tests; in the gateway run leave them out (and PostgreSQL variants:
    the backends run on SQLite)."""
    here = Path(__file__).parent
    kept, dropped = [], []
    for item in items:
        if item.path.parent != here:
            kept.append(item)
            continue
        key = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        http_suite = item.path.name.startswith("test_http_")
        if key in IN_PROCESS_ONLY or not (http_suite or key in HTTP_ONLY_ELSEWHERE):
            item.add_marker(pytest.mark.in_process)
        through_gateway = not item.get_closest_marker("in_process")
        if GATEWAY and not (through_gateway and not item.get_closest_marker("postgres")):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
async def make_client(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[ClientFactory]:
    """Returns ``make(operations=None, user_resolver=None, **settings) -> client`` with the
    app's lifespan running; the client's ``runtime`` attribute is the app's runtime. In the
    gateway run the client talks to a gateway over real backend processes instead (no
    ``runtime``)."""
    if GATEWAY:
        from tests.gateway.cluster import gateway_clients

        pool = request.getfixturevalue("backend_pool")
        async with gateway_clients(pool, ops.ALL) as make_gateway_client:
            yield make_gateway_client
        return
    async with AsyncExitStack() as stack:
        count = 0

        async def make(
            operations: Sequence[type] | None = None,
            user_resolver: Any = None,
            **overrides: Any,
        ) -> httpx.AsyncClient:
            nonlocal count
            count += 1
            values: dict[str, Any] = {
                "database_url": f"sqlite:///{tmp_path}/db{count}.sqlite",
                "files_url": f"file://{tmp_path}/files{count}",
                "flush_interval": 0.05,
            }
            values.update(overrides)
            app = bo.create_app(
                operations or ops.ALL, bo.Settings(**values), user_resolver=user_resolver
            )
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
