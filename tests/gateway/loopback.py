"""An ASGI app served by uvicorn on a free loopback port, inside the test's event loop."""

from __future__ import annotations

import asyncio
import time

import uvicorn
from starlette.types import ASGIApp

START_TIMEOUT = 30.0


class LoopbackServer:
    """uvicorn serving an ASGI app on a free port of 127.0.0.1, in this event loop."""

    def __init__(self, app: ASGIApp) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self) -> str:
        """Serve and wait until the port is open; returns the base URL."""
        self.task = asyncio.create_task(self.server.serve())
        deadline = time.monotonic() + START_TIMEOUT
        while not self.server.started:
            if self.task.done():
                self.task.result()
                raise AssertionError("server stopped during start-up")
            if time.monotonic() > deadline:
                raise AssertionError("server did not start")
            await asyncio.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        """Stop serving (idempotent); the port refuses connections afterwards."""
        if self.task is not None and not self.task.done():
            self.server.should_exit = True
            await self.task
