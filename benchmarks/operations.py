"""The benchmark's own operations, loaded into the service with ``--operations``."""

from __future__ import annotations

import asyncio
from datetime import date, timedelta

from pydantic import Field

import bulkops as bo

BENCH_ROWS = "bench-rows"
BENCH_PIPELINE = "bench-pipeline"
BENCH_SIGNALS = "bench-signals"
STEP_SLEEP = 0.01  # seconds each step of bench-pipeline sleeps
PIPELINE_STEPS = 3


class BenchMeta(bo.Metadata):
    """Metadata with nothing required: uploads send ``{}``."""

    note: str | None = None


class BenchRow(bo.Row):
    """One generated person; the reference loop validates with this same class."""

    name: str
    email: str
    age: int
    department: str
    start_date: date = Field(alias="startDate")


@bo.operation(BENCH_ROWS, description="Validates each row and does nothing else")
class BenchRows(bo.RowOperation[BenchMeta, BenchRow]):
    """A row operation whose ``process_row`` is empty: the cost measured is bulkops' own."""

    async def process_row(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Nothing to do."""


@bo.operation(BENCH_PIPELINE, description="Three steps that each sleep 10 ms")
class BenchPipeline(bo.PipelineOperation[BenchMeta, BenchRow]):
    """Scenario 4: a row spends 30 ms asleep, so the ideal is concurrency / 0.03 s rows/s."""

    @bo.step("First", order=1)
    async def first(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Sleep like an I/O call."""
        await asyncio.sleep(STEP_SLEEP)

    @bo.step("Second", order=2)
    async def second(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Sleep like an I/O call."""
        await asyncio.sleep(STEP_SLEEP)

    @bo.step("Third", order=3)
    async def third(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Sleep like an I/O call."""
        await asyncio.sleep(STEP_SLEEP)


@bo.operation(BENCH_SIGNALS, description="Every row waits for a signal keyed by its email")
class BenchSignals(bo.PipelineOperation[BenchMeta, BenchRow]):
    """Scenario 5: the emails are unique, so each signal completes exactly one row."""

    @bo.signal_step(
        "Approve", order=1, key=lambda row, md: row.email, timeout=timedelta(minutes=10)
    )
    async def approve(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Nothing to start: the row just waits."""

    @bo.step("Done", order=2)
    async def done(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Nothing to do."""


BENCH_WAIT = "bench-wait"
WAIT_SLEEP = 0.02  # seconds each row of bench-wait sleeps


@bo.operation(BENCH_WAIT, description="Each row waits 20 ms, like a call to another service")
class BenchWait(bo.RowOperation[BenchMeta, BenchRow]):
    """Scenario 10: rows that wait on I/O, so more workers can process more at once."""

    async def process_row(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Wait like an I/O call."""
        await asyncio.sleep(WAIT_SLEEP)


BENCH_CALL = "bench-call"
CALL_SLEEP = 0.01  # seconds each row of bench-call sleeps


@bo.operation(BENCH_CALL, description="Each row waits 10 ms, like a quick call to a service")
class BenchCall(bo.RowOperation[BenchMeta, BenchRow]):
    """Scenarios 19 and 20: many people's imports of rows that call another service."""

    async def process_row(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Wait like an I/O call."""
        await asyncio.sleep(CALL_SLEEP)


BENCH_BATCH = "bench-batch"
BATCH_SIZE = 500


@bo.operation(
    BENCH_BATCH, batch_size=BATCH_SIZE, description="Validates each row; batches do nothing"
)
class BenchBatch(bo.BatchOperation[BenchMeta, BenchRow]):
    """Scenario 14: the rows of scenario 1 in batches of 500 through an empty
    ``process_batch``, for a downstream system with a bulk API."""

    async def process_batch(self, rows: list[BenchRow], metadata: BenchMeta) -> None:
        """Nothing to do: every row of the batch succeeded."""


BENCH_TWO_STEPS = "bench-two-steps"
TWO_STEP_SLEEP = 0.005  # seconds each step of bench-two-steps sleeps


@bo.operation(BENCH_TWO_STEPS, description="Two steps that each sleep 5 ms")
class BenchTwoSteps(bo.PipelineOperation[BenchMeta, BenchRow]):
    """Scenario 17: a row spends 10 ms asleep, so the ideal is concurrency / 0.01 s rows/s,
    whether its outcome is stored in batches or as it finishes (``BULKOPS_FLUSH_ROWS=1``)."""

    @bo.step("First", order=1)
    async def first(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Sleep like an I/O call."""
        await asyncio.sleep(TWO_STEP_SLEEP)

    @bo.step("Second", order=2)
    async def second(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Sleep like an I/O call."""
        await asyncio.sleep(TWO_STEP_SLEEP)


BENCH_UNDO = "bench-undo"


@bo.operation(BENCH_UNDO, description="Empty process_row and undo_row")
class BenchUndo(bo.RowOperation[BenchMeta, BenchRow]):
    """Scenario 23: the cost of undoing an operation is bulkops' own (its undo reads the
    file again: no row data kept)."""

    async def process_row(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Nothing to do."""

    async def undo_row(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Nothing to undo."""
