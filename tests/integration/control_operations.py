"""Operations with controls: failure thresholds, batches, rate limits, dialects, versions."""

from __future__ import annotations

import time

import bulkops as bo

LOG: list[str] = []
BATCHES: list[list[str]] = []
STARTS: list[float] = []


def reset() -> None:
    LOG.clear()
    BATCHES.clear()
    STARTS.clear()


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str
    email: str | None = None


@bo.operation("tolerant", tolerated_failure_count=2, track_row_data=True, retryable=True)
class Tolerant(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        LOG.append(row.name)
        if row.name.startswith("bad"):
            raise RuntimeError(f"{row.name} is bad")


@bo.operation("tolerant-share", tolerated_failure_percentage=25)
class TolerantShare(bo.RowOperation[Meta, Item]):
    async def validate_row(self, row: Item, metadata: Meta) -> None:
        if row.name.startswith("invalid"):
            raise bo.ValidationError("invalid on purpose")

    async def process_row(self, row: Item, metadata: Meta) -> None:
        LOG.append(row.name)


@bo.operation(
    "batched", batch_size=3, track_row_data=True, retryable=True, description="Three at a time"
)
class Batched(bo.BatchOperation[Meta, Item]):
    async def validate_row(self, row: Item, metadata: Meta) -> None:
        if row.name.startswith("invalid"):
            raise bo.ValidationError("invalid on purpose")

    async def process_batch(self, rows: list[Item], metadata: Meta) -> list[str | None] | None:
        names = [row.name for row in rows]
        BATCHES.append(names)
        if "boom" in names:
            raise RuntimeError("the bulk API is down")
        if all(not name.startswith("no") for name in names):
            return None
        return [f"{name} refused" if name.startswith("no") else None for name in names]


@bo.operation(
    "batched-plain", batch_size=3, retryable=True, description="Batched, keeping no row data"
)
class BatchedPlain(Batched):
    """The same batches; completed rows leave nothing but their number and time."""


@bo.operation("limited", rate_limit="5/s", description="At most five calls a second")
class Limited(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        STARTS.append(time.monotonic())


@bo.operation("step-limited", description="One step at four calls a second")
class StepLimited(bo.PipelineOperation[Meta, Item]):
    @bo.step("Free", order=1)
    async def free(self, row: Item, metadata: Meta) -> None:
        LOG.append(row.name)

    @bo.step("Limited", order=2, rate_limit="4/s")
    async def limited(self, row: Item, metadata: Meta) -> None:
        STARTS.append(time.monotonic())


@bo.operation("semicolons", csv_delimiter=";", schema_version="2.1")
class Semicolons(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        LOG.append(f"{row.name}|{row.email}")


@bo.operation("mapped", track_row_data=True, retryable=True)
class Mapped(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        LOG.append(f"{row.name}|{row.email}")
        if row.name.startswith("flaky") and LOG.count(f"{row.name}|{row.email}") == 1:
            raise RuntimeError("first attempt fails")


ALL = [Tolerant, TolerantShare, Batched, BatchedPlain, Limited, StepLimited, Semicolons, Mapped]
