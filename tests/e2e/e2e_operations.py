"""An operation for cross-process tests: rows named wait* wait until a gate file exists."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import bulkops as bo


class GateMeta(bo.Metadata):
    gate: str
    log: str


class Item(bo.Row):
    name: str


@bo.operation("file-gated", description="Waits for a gate file on rows named wait*")
class FileGated(bo.RowOperation[GateMeta, Item]):
    async def process_row(self, row: Item, metadata: GateMeta) -> None:
        if row.name.startswith("wait"):
            while not Path(metadata.gate).exists():
                await asyncio.sleep(0.02)
        with open(metadata.log, "a") as log:
            log.write(row.name + "\n")


class LogMeta(bo.Metadata):
    log: str


@bo.operation("e2e-approval", description="Waits for a signal keyed by the row's name")
class E2EApproval(bo.PipelineOperation[LogMeta, Item]):
    @bo.signal_step("Approve", order=1, key=lambda row, md: row.name, timeout=timedelta(minutes=2))
    async def ask(self, row: Item, metadata: LogMeta) -> None:
        with open(metadata.log, "a") as log:
            log.write(f"ask {row.name}\n")

    @bo.step("Done", order=2)
    async def done(self, row: Item, metadata: LogMeta) -> None:
        with open(metadata.log, "a") as log:
            log.write(f"done {row.name}\n")


class FailMeta(bo.Metadata):
    log: str
    fail_file: str
    delay_ms: int = 0


@bo.operation("e2e-retry", retryable=True, track_row_data=True)
class E2ERetry(bo.RowOperation[FailMeta, Item]):
    async def process_row(self, row: Item, metadata: FailMeta) -> None:
        if metadata.delay_ms:
            await asyncio.sleep(metadata.delay_ms / 1000)
        with open(metadata.log, "a") as log:
            log.write(row.name + "\n")
        failing = Path(metadata.fail_file)
        if failing.exists() and row.name in failing.read_text().split():
            raise RuntimeError(f"{row.name} is on the fail list")


class SlowMeta(bo.Metadata):
    log: str
    delay_ms: int = 5


@bo.operation("slow-log", description="Each row waits a little, then appends its name to a log")
class SlowLog(bo.RowOperation[SlowMeta, Item]):
    async def process_row(self, row: Item, metadata: SlowMeta) -> None:
        await asyncio.sleep(metadata.delay_ms / 1000)
        # One write per row: the side effect that a test counts to find rows run twice.
        with open(metadata.log, "a") as log:
            log.write(row.name + "\n")


@bo.operation("e2e-limited", rate_limit="5/s", description="Five calls a second, logged")
class E2ELimited(bo.RowOperation[LogMeta, Item]):
    async def process_row(self, row: Item, metadata: LogMeta) -> None:
        with open(metadata.log, "a") as log:
            log.write(f"{time.time()} {row.name}\n")
