"""Operations for the retry tests: steps fail on demand and log what they ran."""

from __future__ import annotations

import bulkops as bo

LOG: list[tuple[str, str]] = []
# (row name, step name) -> how many more times that step fails for that row
FAILURES: dict[tuple[str, str], int] = {}


def reset() -> None:
    LOG.clear()
    FAILURES.clear()


def _run(name: str, step: str) -> None:
    LOG.append((name, step))
    left = FAILURES.get((name, step), 0)
    if left > 0:
        FAILURES[(name, step)] = left - 1
        raise RuntimeError(f"{step} failed for {name}")


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str
    size: int = 1


@bo.operation("four-steps", retryable=True, track_row_data=True)
class FourSteps(bo.PipelineOperation[Meta, Item]):
    @bo.step("A", order=1)
    async def a(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "A")

    @bo.step("B", order=2)
    async def b(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "B")

    @bo.step("C", order=3)
    async def c(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "C")

    @bo.step("D", order=4)
    async def d(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "D")


@bo.operation("guarded", retryable=True, track_row_data=True)
class Guarded(bo.PipelineOperation[Meta, Item]):
    @bo.step("A", order=1)
    async def a(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "A")

    @bo.step("Send", order=2, allow_operation_retry=False)
    async def send(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "Send")


@bo.operation("row-retry", track_row_data=True)
class RowRetry(bo.RowOperation[Meta, Item]):
    retryable = True  # set on the class, not the decorator

    async def process_row(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "process")


@bo.operation("not-retryable", track_row_data=True)
class NotRetryable(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "process")


@bo.operation("untracked", retryable=True)
class Untracked(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "process")


ALL = [FourSteps, Guarded, RowRetry, NotRetryable, Untracked]
