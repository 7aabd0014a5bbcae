"""An operation for the row helper tests, loaded from this file by its path: in the test
process and in the helper process alike. Module state is not shared between them, so rows
leave their side effects in files the metadata names."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import bulkops as bo


class Meta(bo.Metadata):
    log: str  # each processed row appends "<n> <pid>" here
    gate: str = ""  # row gate_row waits while this file exists...
    gate_row: int = 0  # ...after writing its pid to "<gate>.reached"


class Item(bo.Row):
    n: int
    fail: str = ""


async def _wait_at_gate(metadata: Meta) -> None:
    Path(f"{metadata.gate}.reached").write_text(str(os.getpid()))
    while Path(metadata.gate).exists():
        await asyncio.sleep(0.01)


@bo.operation("helper-rows")
class HelperRows(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        if row.n == metadata.gate_row:
            await _wait_at_gate(metadata)
        with open(metadata.log, "a") as log:
            log.write(f"{row.n} {os.getpid()}\n")
        if row.fail == "process":
            raise RuntimeError(f"row {row.n} refused")


@bo.operation("helper-validated")
class HelperValidated(HelperRows):
    """As helper-rows, with a ``validate_row`` that refuses every row ending in 3."""

    async def validate_row(self, row: Item, metadata: Meta) -> None:
        if row.n % 10 == 3:
            raise bo.ValidationError(f"row {row.n} ends in 3")


@bo.operation("helper-batched", batch_size=7)
class HelperBatched(bo.BatchOperation[Meta, Item]):
    """Batches of seven, each row logged; rows marked "process" fail."""

    async def process_batch(self, rows: list[Item], metadata: Meta) -> list[str | None]:
        if any(row.n == metadata.gate_row for row in rows):
            await _wait_at_gate(metadata)
        with open(metadata.log, "a") as log:
            log.writelines(f"{row.n} {os.getpid()}\n" for row in rows)
        return [f"row {row.n} refused" if row.fail == "process" else None for row in rows]


@bo.operation("helper-tracked", track_row_data=True, retryable=True)
class HelperTracked(HelperRows):
    """As helper-rows, keeping row data; ``validate_row`` logs "<n> <pid>" to
    "<log>.validated" (a dry run's rows are validated, never processed)."""

    async def validate_row(self, row: Item, metadata: Meta) -> None:
        with open(f"{metadata.log}.validated", "a") as log:
            log.write(f"{row.n} {os.getpid()}\n")
