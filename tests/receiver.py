"""A webhook receiver for tests: a real HTTP server on loopback that records what it gets
and can answer 500 a few times, or hang."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Received:
    """One request the receiver got."""

    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers 200, after ``fail_first`` answers of 500; with ``hang``, not before
    ``release`` is set (set it before stopping the server)."""

    fail_first: int = 0
    hang: bool = False
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            self.received.append(Received(dict(request.headers), await request.body()))
            self.arrived.set()
            if self.hang:
                await self.release.wait()
            if self.fail_first > 0:
                self.fail_first -= 1
                return Response("not now", status_code=500)
            return Response("ok")

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])
