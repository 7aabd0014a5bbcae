"""Operations of the chaos run: every (row, step) execution appends one line to a log, so
the run can count how often each ran."""

from __future__ import annotations

import asyncio
import os
import time

import bulkops as bo

CHAOS_ROWS = "chaos-rows"
CHAOS_PIPELINE = "chaos-pipeline"


class ChaosMeta(bo.Metadata):
    """Where the executions are logged, and how long each row (or step) takes."""

    log: str
    delay_ms: int = 10


class ChaosRow(bo.Row):
    """A row that only carries its number."""

    n: int


def record(path: str, row: int, step: int) -> None:
    """Append ``row step pid time`` to the log in one write (an append of one short line
    does not tear, whichever process makes it)."""
    line = f"{row} {step} {os.getpid()} {time.time():.4f}\n".encode()
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(handle, line)
    finally:
        os.close(handle)


@bo.operation(CHAOS_ROWS, description="Each row sleeps, then logs that it ran")
class ChaosRows(bo.RowOperation[ChaosMeta, ChaosRow]):
    """A row operation: one execution per row (step 0)."""

    async def process_row(self, row: ChaosRow, metadata: ChaosMeta) -> None:
        """Sleep for the row's time, then log the execution."""
        await asyncio.sleep(metadata.delay_ms / 1000)
        record(metadata.log, row.n, 0)


@bo.operation(CHAOS_PIPELINE, description="Two steps that each sleep, then log that they ran")
class ChaosPipeline(bo.PipelineOperation[ChaosMeta, ChaosRow]):
    """A two-step pipeline: executions of steps 1 and 2 per row."""

    @bo.step("First", order=1)
    async def first(self, row: ChaosRow, metadata: ChaosMeta) -> None:
        """Sleep, then log."""
        await asyncio.sleep(metadata.delay_ms / 1000)
        record(metadata.log, row.n, 1)

    @bo.step("Second", order=2)
    async def second(self, row: ChaosRow, metadata: ChaosMeta) -> None:
        """Sleep, then log."""
        await asyncio.sleep(metadata.delay_ms / 1000)
        record(metadata.log, row.n, 2)
