"""Scenario 5's client: signal every waiting row over a pool of connections, then watch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
import httpx

from benchmarks.client import TERMINAL
from benchmarks.load import LoadResult
from benchmarks.service import ServiceError

CONNECTIONS = 20
WAIT_POLL = 0.05  # while the rows reach their signal step
COMPLETION_POLL = 0.02  # after the last signal
WAIT_TIMEOUT = 300.0
COMPLETION_TIMEOUT = 60.0


@dataclass
class SignalRun:
    """The answers to the signals (``seconds``: first POST to the last 200 answer), and how
    long after the last accepted signal the operation was seen final."""

    answers: LoadResult = field(default_factory=LoadResult)
    accepted: int = 0
    completion_delay: float | None = None  # None when some row was never signalled
    status: dict[str, Any] = field(default_factory=dict)
    status_polls: int = 0

    @property
    def signals_per_second(self) -> float:
        """Accepted signals per second, first POST to the last accepted answer."""
        seconds = self.answers.seconds
        return self.accepted / seconds if seconds > 0 else 0.0


def waiting_rows(client: httpx.Client, url: str, operation_id: str) -> int:
    """How many rows of the operation wait at a signal step (one row page, for its total)."""
    response = client.get(
        f"{url}/api/bulks/{operation_id}/rows",
        params={"state": "WaitingForCompletion", "pageSize": 1},
    )
    response.raise_for_status()
    return int(response.json()["totalCount"])


def wait_until_waiting(client: httpx.Client, url: str, operation_id: str, rows: int) -> float:
    """Poll until ``rows`` rows wait at their signal step; return the seconds it took."""
    start = time.perf_counter()
    while (waiting := waiting_rows(client, url, operation_id)) < rows:
        if time.perf_counter() - start > WAIT_TIMEOUT:
            status = client.get(f"{url}/api/bulks/{operation_id}/status").json()
            problem = f"{waiting:,} of {rows:,} rows waiting after {WAIT_TIMEOUT:.0f} s"
            raise ServiceError(f"{problem}: {status}")
        time.sleep(WAIT_POLL)
    return time.perf_counter() - start


async def _signaller(
    session: aiohttp.ClientSession,
    base: str,
    keys: Sequence[str],
    run: SignalRun,
    last: list[float],
) -> None:
    for key in keys:
        sent = time.perf_counter()
        try:
            async with session.post(f"{base}/{quote(key, safe='')}") as response:
                body = await response.read()
        except aiohttp.ClientError as exc:
            run.answers.failed(f"{type(exc).__name__}: {exc}")
            continue
        answered = time.perf_counter()
        if response.status == 200:
            run.answers.latencies.append(answered - sent)
            run.accepted += 1
            last[0] = max(last[0], answered)
        else:
            run.answers.failed(f"HTTP {response.status}: {body[:200].decode(errors='replace')}")


async def _until_final(
    session: aiohttp.ClientSession, url: str, operation_id: str, run: SignalRun
) -> float:
    """Poll the status every COMPLETION_POLL until it is final; the moment it was seen."""
    start = time.perf_counter()
    while True:
        async with session.get(f"{url}/api/bulks/{operation_id}/status") as response:
            response.raise_for_status()
            run.status = await response.json()
        seen = time.perf_counter()
        run.status_polls += 1
        if run.status.get("status") in TERMINAL:
            return seen
        if seen - start > COMPLETION_TIMEOUT:
            problem = f"not final {COMPLETION_TIMEOUT:.0f} s after the last signal"
            raise ServiceError(f"{problem}: {run.status}")
        await asyncio.sleep(COMPLETION_POLL)


async def _warm(session: aiohttp.ClientSession, url: str) -> None:
    async with session.get(f"{url}/health/live") as response:
        await response.read()


async def signal_all(
    url: str, operation_id: str, keys: Sequence[str], connections: int = CONNECTIONS
) -> SignalRun:
    """POST ``/signal/{key}`` for every key from ``connections`` concurrent tasks sharing a
    pool of as many connections, then poll the status until final.

    The client is aiohttp, whose cost per request is a tenth of httpx's: with httpx the
    client took a whole core on this 2-core machine and measured itself rather than the
    service. The connections are opened (one unrecorded request each) before the clock starts.
    """
    run = SignalRun()
    connector = aiohttp.TCPConnector(limit=connections)
    timeout = aiohttp.ClientTimeout(total=30.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(_warm(session, url) for _ in range(connections)))
        base = f"{url}/api/bulks/{operation_id}/signal"
        last = [0.0]
        start = time.perf_counter()
        await asyncio.gather(
            *(
                _signaller(session, base, keys[i::connections], run, last)
                for i in range(connections)
            )
        )
        run.answers.seconds = max(0.0, last[0] - start)
        if run.accepted == len(keys):
            run.completion_delay = await _until_final(session, url, operation_id, run) - last[0]
    return run
