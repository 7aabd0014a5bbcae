"""Reads wait for their turn while processing is active; nothing else does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message

from bulkops.api.admission import ReadAdmission, ReadAdmissionMiddleware


class Handlers:
    """Routes that count who is inside and stay there until released."""

    def __init__(self) -> None:
        self.inside = 0
        self.entered = 0
        self.release = asyncio.Event()
        self.streaming = asyncio.Event()

    async def read(self, request: Request) -> Response:
        self.inside += 1
        self.entered += 1
        try:
            await self.release.wait()
        finally:
            self.inside -= 1
        return JSONResponse({"ok": True})

    async def write(self, request: Request) -> Response:
        return JSONResponse({"written": True})

    async def stream(self, request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b"first "
            await self.streaming.wait()
            yield b"last"

        return StreamingResponse(body(), media_type="text/plain")


def make_app(admission: ReadAdmission, handlers: Handlers) -> Starlette:
    app = Starlette(
        routes=[
            Route("/api/read", handlers.read),
            Route("/api/read", handlers.write, methods=["POST"]),
            Route("/health/read", handlers.read),
            Route("/api/stream", handlers.stream),
        ]
    )
    app.add_middleware(ReadAdmissionMiddleware, admission=admission)
    return app


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


def client_of(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_while_processing_reads_beyond_the_limit_wait_in_order(handlers: Handlers) -> None:
    admission = ReadAdmission(limit=1, max_wait=600)
    admission.watch(lambda: True)
    async with client_of(make_app(admission, handlers)) as client:
        first = asyncio.create_task(client.get("/api/read"))
        await until(lambda: handlers.inside == 1)
        second = asyncio.create_task(client.get("/api/read"))
        third = asyncio.create_task(client.get("/api/read"))
        await until(lambda: admission.waiting == 2)
        assert handlers.entered == 1  # the others wait rather than run
        # Writes and reads outside the API are never held.
        assert (await client.post("/api/read")).json() == {"written": True}
        handlers.release.set()
        answers = await asyncio.gather(first, second, third)
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert handlers.entered == 3
        assert (admission.running, admission.waiting) == (0, 0)


async def test_reads_outside_the_api_pass_a_full_gate(handlers: Handlers) -> None:
    admission = ReadAdmission(limit=1, max_wait=600)
    admission.watch(lambda: True)
    async with client_of(make_app(admission, handlers)) as client:
        held = asyncio.create_task(client.get("/api/read"))
        await until(lambda: handlers.inside == 1)
        health = asyncio.create_task(client.get("/health/read"))
        await until(lambda: handlers.inside == 2)  # entered though the gate is full
        assert admission.waiting == 0
        handlers.release.set()
        await asyncio.gather(held, health)


async def test_reads_of_an_idle_process_are_not_held(handlers: Handlers) -> None:
    busy = False
    admission = ReadAdmission(limit=1, max_wait=600)
    admission.watch(lambda: busy)
    async with client_of(make_app(admission, handlers)) as client:
        reads = [asyncio.create_task(client.get("/api/read")) for _ in range(3)]
        await until(lambda: handlers.inside == 3)
        handlers.release.set()
        await asyncio.gather(*reads)
        assert (admission.running, admission.waiting) == (0, 0)


async def test_a_read_waits_at_most_max_wait(handlers: Handlers) -> None:
    admission = ReadAdmission(limit=1, max_wait=0.05)
    admission.watch(lambda: True)
    async with client_of(make_app(admission, handlers)) as client:
        first = asyncio.create_task(client.get("/api/read"))
        await until(lambda: handlers.inside == 1)
        second = asyncio.create_task(client.get("/api/read"))
        # The first still holds its turn; the second goes ahead once overdue.
        await until(lambda: handlers.inside == 2)
        assert admission.waiting == 0
        handlers.release.set()
        await asyncio.gather(first, second)
        assert admission.running == 0


async def test_a_streamed_answer_gives_up_its_turn_when_it_starts(handlers: Handlers) -> None:
    admission = ReadAdmission(limit=1, max_wait=600)
    admission.watch(lambda: True)
    app = make_app(admission, handlers)
    sent: list[Message] = []

    requested = False
    disconnected = asyncio.Event()

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/stream",
        "raw_path": b"/api/stream",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "server": ("t", 80),
    }
    streaming = asyncio.create_task(app(scope, receive, send))
    await until(lambda: any(m.get("body") == b"first " for m in sent))
    assert admission.running == 0  # the body goes on outside the gate
    async with client_of(app) as client:
        handlers.release.set()
        assert (await client.get("/api/read")).status_code == 200
    handlers.streaming.set()
    await streaming
    assert b"".join(m.get("body", b"") for m in sent) == b"first last"
    assert admission.running == 0


async def test_a_cancelled_waiting_read_leaves_the_queue(handlers: Handlers) -> None:
    admission = ReadAdmission(limit=1, max_wait=600)
    admission.watch(lambda: True)
    async with client_of(make_app(admission, handlers)) as client:
        first = asyncio.create_task(client.get("/api/read"))
        await until(lambda: handlers.inside == 1)
        second = asyncio.create_task(client.get("/api/read"))
        await until(lambda: admission.waiting == 1)
        second.cancel()
        await until(lambda: admission.waiting == 0)
        handlers.release.set()
        assert (await first).status_code == 200
        assert handlers.entered == 1
        assert admission.running == 0


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReadAdmission(limit=0)
