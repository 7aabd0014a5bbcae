"""Concurrent status pollers: N clients, each on its own connection, polling ``GET /status``
a while.

The clients are aiohttp's: on the benchmark's two cores an httpx client's own work per
request (about ten times aiohttp's) queued the answers in the benchmark process and was
measured as the service's latency."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from dataclasses import dataclass, field

import aiohttp

CLIENTS = 20
INTERVAL = 0.1  # each client polls every 0.1 s: 200 requests/s from 20 clients


@dataclass
class LoadResult:
    """Per-request latencies (seconds) of successful polls, and the failures."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def percentile(self, percent: float) -> float:
        """Nearest-rank percentile of the latencies (0.0 when there are none)."""
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        rank = max(1, math.ceil(percent / 100 * len(ordered)))
        return ordered[rank - 1]

    def failed(self, problem: str) -> None:
        """Count a failed request, keeping the first few messages."""
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(problem)


async def _poller(
    client: aiohttp.ClientSession,
    url: str,
    window: tuple[float, float],
    offset: float,
    result: LoadResult,
) -> None:
    start, seconds = window
    due = start + offset
    while True:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if time.perf_counter() - start >= seconds:
            return
        sent = time.perf_counter()
        try:
            async with client.get(url) as response:
                await response.read()
        except aiohttp.ClientError as exc:
            result.failed(f"{type(exc).__name__}: {exc}")
        else:
            if response.status == 200:
                result.latencies.append(time.perf_counter() - sent)
            else:
                result.failed(f"HTTP {response.status}")
        due += INTERVAL


async def _warm(client: aiohttp.ClientSession, url: str) -> None:
    async with client.get(url) as response:
        await response.read()


async def poll_status(url: str, seconds: float, clients: int = CLIENTS) -> LoadResult:
    """Poll ``url`` from ``clients`` concurrent clients for ``seconds``, starts staggered.

    Clients are created and connected (one unrecorded request each) before the clock
    starts.
    """
    result = LoadResult()
    timeout = aiohttp.ClientTimeout(total=10.0)
    async with contextlib.AsyncExitStack() as stack:
        pool = [
            await stack.enter_async_context(
                aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=1))
            )
            for _ in range(clients)
        ]
        await asyncio.gather(*(_warm(client, url) for client in pool))
        start = time.perf_counter()
        await asyncio.gather(
            *(
                _poller(client, url, (start, seconds), INTERVAL * i / clients, result)
                for i, client in enumerate(pool)
            )
        )
        result.seconds = time.perf_counter() - start
    return result


class BackgroundLoad(threading.Thread):
    """``poll_status`` on its own event loop in a thread, beside a synchronous client."""

    def __init__(self, url: str, seconds: float, clients: int = CLIENTS) -> None:
        super().__init__(name="status-pollers", daemon=True)
        self._args = (url, seconds, clients)
        self.result = LoadResult()
        self.failure: BaseException | None = None

    def run(self) -> None:
        """Thread body."""
        try:
            self.result = asyncio.run(poll_status(*self._args))
        except BaseException as exc:
            self.failure = exc
