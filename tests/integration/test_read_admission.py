"""Reads of a combined instance while it processes rows: they queue for their turn, and
processing goes on under a flood of them; what they answer stays fresh."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

import bulkops as bo
from bulkops.api.admission import ReadAdmission
from bulkops.runtime import Runtime
from tests.integration import operations as ops
from tests.integration.conftest import create_ok, wait_status, wait_until

READERS = 8


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    settings = bo.Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite",
        files_url=f"file://{tmp_path}/files",
        flush_interval=0.05,
    )
    application = bo.create_app(ops.ALL, settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bulkops.test") as c:
        yield c


def _csv(rows: int) -> str:
    return "name,email\n" + "".join(f"n{i},n{i}@x.io\n" for i in range(rows))


async def test_processing_goes_on_under_a_flood_of_reads_that_queue(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    admission: ReadAdmission = app.state.admission
    runtime: Runtime = app.state.runtime
    rows = 2000
    operation_id = await create_ok(client, _csv(rows))
    stop = asyncio.Event()
    most_waiting, active_seen, answers = 0, False, 0

    async def read(index: int) -> None:
        nonlocal most_waiting, active_seen, answers
        paths = [f"/api/bulks/{operation_id}/status", f"/api/bulks/{operation_id}/errors"]
        paths.append("/api/bulks")
        turn = index
        while not stop.is_set():
            response = await client.get(paths[turn % 3])
            assert response.status_code == 200, response.text
            answers += 1
            turn += 1
            most_waiting = max(most_waiting, admission.waiting)
            active_seen = active_seen or runtime.processing_active()

    readers = [asyncio.create_task(read(i)) for i in range(READERS)]
    try:
        status = await wait_status(client, operation_id, timeout=60)
    finally:
        stop.set()
        await asyncio.gather(*readers)
    assert (status["status"], status["processedRows"]) == ("Completed", rows)
    assert active_seen and answers > 0
    assert most_waiting > 0  # reads beyond the limit waited for their turn
    assert (admission.running, admission.waiting) == (0, 0)


async def test_an_idle_process_does_not_hold_reads_back(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    runtime: Runtime = app.state.runtime
    operation_id = await create_ok(client, _csv(3))
    await wait_status(client, operation_id)

    async def idle() -> bool:
        return not runtime.processing_active()

    await wait_until(idle, what="processing to count as ended")
    admission: ReadAdmission = app.state.admission
    reads = [client.get(f"/api/bulks/{operation_id}/status") for _ in range(READERS)]
    assert all(r.status_code == 200 for r in await asyncio.gather(*reads))
    assert admission.waiting == 0


async def test_a_read_under_the_gate_sees_a_change_at_once(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    runtime: Runtime = app.state.runtime
    content = "name,email\na,a@x.io\nwait-b,b@x.io\nc,c@x.io\n"
    operation_id = await create_ok(client, content, operation="gated")

    async def held() -> bool:
        return ops.GATE.entered >= 1 and runtime.processing_active()

    await wait_until(held, what="a row at the gate while processing is active")
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    assert status["status"] == "Running"
    cancelled = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert cancelled.status_code == 200
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    assert status["status"] == "Cancelled"
    listed = (await client.get("/api/bulks")).json()["items"]
    assert [item["status"] for item in listed if item["id"] == operation_id] == ["Cancelled"]
    ops.GATE.open()
