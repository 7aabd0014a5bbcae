"""Row slots: how many rows (or batches) of a run may run at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Slots:
    """``MaxRowConcurrency`` slots: a running row (or batch) holds one; it gives its slot up
    while it waits for a rate-limit permit, so waiting rows do not keep others from running."""

    def __init__(self, count: int) -> None:
        self._free = asyncio.Semaphore(count)

    async def take(self) -> None:
        """Wait for a free slot and hold it."""
        await self._free.acquire()

    def give(self) -> None:
        """Free a held slot."""
        self._free.release()

    @contextlib.asynccontextmanager
    async def given_up(self) -> AsyncIterator[None]:
        """Free the held slot for the duration of the block, then take one again."""
        self.give()
        try:
            yield
        finally:
            await self.take()
