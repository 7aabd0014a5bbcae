"""Operations for the chunked-processing tests: they record every row they process."""

from __future__ import annotations

import asyncio
from collections import Counter

import bulkops as bo

PROCESSED: Counter[str] = Counter()
FIXED: set[str] = set()  # rows that succeed from now on
GATE = asyncio.Event()  # opened: gated rows go on
RUNNING: set[str] = set()  # rows of chunked-gated inside process_row now
MOST_RUNNING = [0]  # the most rows of chunked-gated inside process_row at once
# Rows of chunked-paced, per operation: inside process_row now, the most at once, done.
IN_FLIGHT: Counter[str] = Counter()
MOST_IN_FLIGHT: Counter[str] = Counter()
DONE: Counter[str] = Counter()


def reset() -> None:
    global GATE
    PROCESSED.clear()
    FIXED.clear()
    RUNNING.clear()
    MOST_RUNNING[0] = 0
    IN_FLIGHT.clear()
    MOST_IN_FLIGHT.clear()
    DONE.clear()
    GATE = asyncio.Event()  # an event belongs to the loop that first waited on it


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


@bo.operation("chunked", retryable=True, track_row_data=True)
class Chunked(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        PROCESSED[row.name] += 1
        if row.name.startswith("bad") and row.name not in FIXED:
            raise RuntimeError(f"{row.name} is bad")


@bo.operation("chunked-tolerant", tolerated_failure_count=2)
class ChunkedTolerant(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        PROCESSED[row.name] += 1
        if row.name.startswith("bad"):
            raise RuntimeError(f"{row.name} is bad")


@bo.operation("chunked-gated")
class ChunkedGated(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        PROCESSED[row.name] += 1
        RUNNING.add(row.name)
        MOST_RUNNING[0] = max(MOST_RUNNING[0], len(RUNNING))
        try:
            if row.name.startswith("wait"):
                await GATE.wait()
        finally:
            RUNNING.discard(row.name)


class PacedMeta(bo.Metadata):
    delay_ms: int = 20


@bo.operation("chunked-paced")
class ChunkedPaced(bo.RowOperation[PacedMeta, Item]):
    """Each row waits ``delay_ms`` (a call to another service), counted per operation."""

    async def process_row(self, row: Item, metadata: PacedMeta) -> None:
        operation = str(bo.current_row().operation_id)
        IN_FLIGHT[operation] += 1
        MOST_IN_FLIGHT[operation] = max(MOST_IN_FLIGHT[operation], IN_FLIGHT[operation])
        try:
            await asyncio.sleep(metadata.delay_ms / 1000)
        finally:
            IN_FLIGHT[operation] -= 1
        DONE[operation] += 1


ALL = [Chunked, ChunkedTolerant, ChunkedGated, ChunkedPaced]
