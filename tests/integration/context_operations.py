"""Operations for the row context tests, loaded by path in the test process and in a row
helper process alike: each call of user code appends what ``bo.current_row()`` said, as a
JSON line, to the file the metadata names (module state is not shared with a helper)."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import bulkops as bo


class Meta(bo.Metadata):
    log: str  # one JSON line per call of user code
    block: str = ""  # while this file exists, rows marked "block" fail


class Item(bo.Row):
    n: int
    key: str = ""
    mark: str = ""  # "block": fails while the metadata's block file exists
    flaky: int = 0  # a pipeline's first step fails on its first ``flaky`` attempts

    def row_id(self) -> str | None:
        return self.key or None


class Plain(bo.Row):
    n: int


def note(metadata: Meta, where: str, **extra: Any) -> bo.RowContext:
    """Append what current_row() says (or the LookupError's text) to the log."""
    entry: dict[str, Any] = {"where": where, "pid": os.getpid(), **extra}
    try:
        context = bo.current_row()
    except LookupError as exc:
        entry["error"] = str(exc)
        _write(metadata, entry)
        raise
    entry.update(
        operation_id=str(context.operation_id),
        operation_name=context.operation_name,
        row_number=context.row_number,
        row_id=context.row_id,
        step_name=context.step_name,
        step_index=context.step_index,
        attempt=context.attempt,
        retry_attempt=context.retry_attempt,
        created_by=context.created_by,
        idempotency_key=context.idempotency_key,
    )
    _write(metadata, entry)
    return context


def _write(metadata: Meta, entry: dict[str, Any]) -> None:
    with open(metadata.log, "a") as log:
        log.write(json.dumps(entry) + "\n")


def _blocked(row: Item, metadata: Meta) -> bool:
    return row.mark == "block" and bool(metadata.block) and Path(metadata.block).exists()


@bo.operation("context-rows", retryable=True, track_row_data=True)
class ContextRows(bo.RowOperation[Meta, Item]):
    """``async def`` methods."""

    async def validate_row(self, row: Item, metadata: Meta) -> None:
        note(metadata, "validate")
        await asyncio.sleep(0)

    async def process_row(self, row: Item, metadata: Meta) -> None:
        await asyncio.sleep(0)
        note(metadata, "process")
        if _blocked(row, metadata):
            raise RuntimeError(f"row {row.n} blocked")


@bo.operation("context-sync-rows", retryable=True, track_row_data=True)
class ContextSyncRows(bo.RowOperation[Meta, Item]):
    """``def`` methods: they run in worker threads."""

    def validate_row(self, row: Item, metadata: Meta) -> None:
        note(metadata, "validate")

    def process_row(self, row: Item, metadata: Meta) -> None:
        note(metadata, "process")
        if _blocked(row, metadata):
            raise RuntimeError(f"row {row.n} blocked")


@bo.operation("context-plain")
class ContextPlain(bo.RowOperation[Meta, Plain]):
    """No validate_row, no row id, no row data: the plain hot path (and a row helper's)."""

    def process_row(self, row: Plain, metadata: Meta) -> None:
        note(metadata, "process")


@bo.operation("context-plain-validated")
class ContextPlainValidated(ContextPlain):
    """As context-plain, with an ``async def`` validate_row."""

    async def validate_row(self, row: Plain, metadata: Meta) -> None:
        note(metadata, "validate")


@bo.operation("context-batch", batch_size=3)
class ContextBatch(bo.BatchOperation[Meta, Item]):
    """process_batch has no current row: it records the LookupError and carries on."""

    async def validate_row(self, row: Item, metadata: Meta) -> None:
        note(metadata, "validate")

    async def process_batch(self, rows: list[Item], metadata: Meta) -> None:
        try:
            note(metadata, "batch", rows=[row.n for row in rows])
        except LookupError:
            return


@bo.operation("context-pipeline", retryable=True, track_row_data=True)
class ContextPipeline(bo.PipelineOperation[Meta, Item]):
    """A plain step retried per step, a ``def`` step that may block, a polling step."""

    @bo.step("Charge", order=1, max_retries=3)
    async def charge(self, row: Item, metadata: Meta) -> None:
        context = note(metadata, "Charge")
        if context.attempt <= row.flaky:
            raise RuntimeError(f"attempt {context.attempt} of row {row.n} failed")

    @bo.step("Notify", order=2)
    def notify(self, row: Item, metadata: Meta) -> None:
        note(metadata, "Notify")
        if _blocked(row, metadata):
            raise RuntimeError(f"row {row.n} blocked")

    @bo.polling_step(
        "Deliver", order=3, poll_interval=timedelta(seconds=0.01), timeout=timedelta(seconds=20)
    )
    async def deliver(self, row: Item, metadata: Meta) -> None:
        note(metadata, "Deliver")

    @deliver.check
    def delivered(self, row: Item, metadata: Meta) -> bool:
        note(metadata, "Deliver check")
        return True


ALL = [
    ContextRows,
    ContextSyncRows,
    ContextPlain,
    ContextPlainValidated,
    ContextBatch,
    ContextPipeline,
]
