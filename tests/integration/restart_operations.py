"""Operations for the restart and audit tests: steps log their idempotency keys, fail on
demand, and one of them can be held until a test lets it go."""

from __future__ import annotations

import asyncio
import time

import bulkops as bo

# (row name, step name, idempotency key) of every step run, in order
KEYS: list[tuple[str, str, str]] = []
# (row name, step name) -> how many more times that step fails for that row
FAILURES: dict[tuple[str, str], int] = {}
# Row names whose step "Hold" waits until RELEASED is set (or 20 s pass)
HELD: set[str] = set()
RELEASED = asyncio.Event()


def reset() -> None:
    KEYS.clear()
    FAILURES.clear()
    HELD.clear()
    RELEASED.clear()


def _run(name: str, step: str) -> None:
    KEYS.append((name, step, bo.current_row().idempotency_key))
    left = FAILURES.get((name, step), 0)
    if left > 0:
        FAILURES[(name, step)] = left - 1
        raise RuntimeError(f"{step} failed for {name}")


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


@bo.operation("keyed-steps", retryable=True, track_row_data=True)
class KeyedSteps(bo.PipelineOperation[Meta, Item]):
    @bo.step("Create account", order=1)
    async def create(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "Create account")

    @bo.step("Send welcome", order=2)
    async def send(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "Send welcome")

    @bo.step("Hold", order=3)
    async def hold(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "Hold")
        deadline = time.monotonic() + 20
        while row.name in HELD and not RELEASED.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


@bo.operation("keyed-row", retryable=True, track_row_data=True)
class KeyedRow(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        _run(row.name, "process")


ALL = [KeyedSteps, KeyedRow]
