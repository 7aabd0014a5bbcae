"""Runs to equalize: another chunk run at once for a tenant the process's share finds short.

When the process's row slots are contended and a tenant is below its fair part of them
because its runs are at their caps (``FairShare.short_of_share``), the process claims
another chunk of one of that tenant's operations and runs it at once, beside the one it
runs already. One such claim at a time, each counted in the share before the next is
decided; when its run ends the share decides afresh. An operation alone, or beside runs
that leave slots free, is never run more than one chunk at a time this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from bulkops.errors import StorageError
from bulkops.storage.records import ChunkRecord

if TYPE_CHECKING:
    from bulkops.engine.fair_share import FairShare

log = logging.getLogger("bulkops.engine")

# Seconds between looks at the share when nothing changed in it: a run's pace (rows
# waiting for a rate limit, say) changes without telling it.
LOOK_AGAIN = 0.5


class ChunkRunner(Protocol):
    """Where the runs to equalize come from: the process's chunk claims."""

    @property
    def full(self) -> bool:
        """True when the process may start no other chunk run (stopping, or at its bound)."""
        ...

    async def claim_among(self, operations: list[UUID]) -> ChunkRecord | None:
        """Claim a chunk of one of ``operations``, if there is one to claim."""

    def run_beside(self, chunk: ChunkRecord, started: asyncio.Event) -> None:
        """Run a claimed chunk beside the process's other runs of its operation; ``started``
        is set once the run has its place in the row slots (or ended)."""


class Equalizer:
    """The runs to equalize of one process: it looks at the share whenever it changed (or
    chunks may be claimable) and at least every ``LOOK_AGAIN`` seconds."""

    def __init__(self, chunks: ChunkRunner, share: FairShare) -> None:
        self._chunks = chunks
        self._share = share
        # Operations a claim to equalize found no chunk of, until news of chunks.
        self._dry: set[UUID] = set()
        self._news = asyncio.Event()  # the share changed, or chunks may be claimable
        self._stopping = False

    @property
    def waiting_for_chunks(self) -> bool:
        """Whether a claim found no chunk of some operations (news of chunks may help)."""
        return bool(self._dry)

    def chunks_found(self) -> None:
        """News of claimable chunks: the operations that had none are tried again."""
        self._dry.clear()
        self._news.set()

    def stop(self) -> None:
        """Look no more."""
        self._stopping = True
        self._news.set()

    async def run(self) -> None:
        """Run another chunk at once of an operation whose tenant the share finds short,
        one claim at a time, until ``stop``; each new run is in the share before the next
        look."""
        self._share.watch(self._news.set)
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), LOOK_AGAIN)
            self._news.clear()
            if self._stopping:
                return
            try:
                await self._run_one_more()
            except StorageError:
                log.warning("Could not claim a chunk to share fairly; will retry", exc_info=True)

    async def _run_one_more(self) -> None:
        for operations in self._share.short_of_share():
            candidates = [operation for operation in operations if operation not in self._dry]
            if self._stopping or self._chunks.full:
                return
            if not candidates:
                continue
            chunk = await self._chunks.claim_among(candidates)
            if chunk is None:
                self._dry.update(candidates)  # none to claim until news of chunks
                continue
            started = asyncio.Event()
            self._chunks.run_beside(chunk, started)
            await started.wait()
            self._news.set()  # look again at once, this run counted
            return
