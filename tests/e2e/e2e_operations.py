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


class UndoMeta(bo.Metadata):
    log: str  # every undo call, one line each: "<row> <step index> <key>"
    effects: str  # a SQLite file: the undos that took effect, once per idempotency key
    delay_ms: int = 0


def _undo_effect(metadata: UndoMeta, name: str) -> None:
    """An idempotent downstream: the call is logged, its effect kept once per key."""
    import sqlite3

    context = bo.current_row()
    time.sleep(metadata.delay_ms / 1000)
    with open(metadata.log, "a") as log:
        log.write(f"{name} {context.step_index} {context.idempotency_key}\n")
    with sqlite3.connect(metadata.effects, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, row TEXT)")
        db.execute("INSERT OR IGNORE INTO effects VALUES (?, ?)", (context.idempotency_key, name))


@bo.operation("e2e-undo", description="Three steps; the first and last are undone slowly")
class E2EUndo(bo.PipelineOperation[UndoMeta, Item]):
    @bo.step("Create", order=1)
    async def create(self, row: Item, metadata: UndoMeta) -> None:
        pass

    @bo.step("Notify", order=2)
    async def notify(self, row: Item, metadata: UndoMeta) -> None:
        pass

    @bo.step("Grant", order=3)
    async def grant(self, row: Item, metadata: UndoMeta) -> None:
        pass

    @bo.undo_step("Create")
    def delete(self, row: Item, metadata: UndoMeta) -> None:
        _undo_effect(metadata, row.name)

    @bo.undo_step("Grant")
    def revoke(self, row: Item, metadata: UndoMeta) -> None:
        _undo_effect(metadata, row.name)
