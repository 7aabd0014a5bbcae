"""Shared rate limits: how fast rows may start."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from bulkops.definition.controls import RateLimit
from bulkops.engine.slots import Slots
from bulkops.storage.ports import RateLimitStore

if TYPE_CHECKING:
    from bulkops.engine.ports import StorageCalls


class RateGate:
    """Asks shared storage for permits of rate limits, so a limit holds across every
    process."""

    def __init__(self, store: RateLimitStore, retry: StorageCalls) -> None:
        self._store = store
        self._retry = retry

    async def try_start(self, key: str, rate: RateLimit) -> float:
        """Record a start under ``key`` now and return 0, or return how long to wait."""
        return await self._retry.call(self._store.acquire, key, rate.count, rate.period)


class Pacer:
    """What a runner awaits right before a rate-limited call: a permit recorded at that
    moment. Between refusals the row sleeps without its slot (when the run has slots), so
    rows waiting for a permit do not keep others from running."""

    def __init__(self, gate: RateGate, slots: Slots | None) -> None:
        self._gate = gate
        self.slots = slots

    async def before(self, key: str, rate: RateLimit) -> None:
        """Return once a call under ``key`` may start (and count it as started)."""
        while (delay := await self._gate.try_start(key, rate)) > 0:
            if self.slots is None:
                await asyncio.sleep(delay)
                continue
            async with self.slots.given_up():
                await asyncio.sleep(delay)
