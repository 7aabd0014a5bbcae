"""Operations for the tests of dry runs, fixes in place and runs from an earlier operation;
they log every call that is not validation, so a test sees that a dry run ran nothing."""

from __future__ import annotations

import asyncio

import bulkops as bo

# (operation, call, row name) of every process_row, process_batch row and step.
RAN: list[tuple[str, str, str]] = []
VALIDATED: list[str] = []  # names validate_row saw
CONTEXTS: list[tuple[int, int, str | None]] = []  # current_row() in validate_row
GATE: asyncio.Event | None = None  # rows named "wait" of "fixable-gated" wait here


def reset() -> None:
    global GATE
    RAN.clear()
    VALIDATED.clear()
    CONTEXTS.clear()
    GATE = None


class Meta(bo.Metadata):
    requested_by: str = "tests"


class Person(bo.Row):
    name: str
    email: str
    age: int | None = None


async def _check(row: Person, metadata: Meta) -> None:
    VALIDATED.append(row.name)
    context = bo.current_row()
    CONTEXTS.append((context.row_number, context.step_index, context.step_name))
    if metadata.requested_by == "explode" and row.name == "explode":
        raise RuntimeError("validate_row broke")
    if "@" not in row.email:
        raise bo.ValidationError(f"email: {row.email!r} has no @")


@bo.operation("fixable", retryable=True, track_row_data=True)
class Fixable(bo.RowOperation[Meta, Person]):
    async def validate_metadata(self, metadata: Meta) -> None:
        if metadata.requested_by == "nobody":
            raise bo.ValidationError("nobody may import")

    async def validate_row(self, row: Person, metadata: Meta) -> None:
        await _check(row, metadata)

    async def process_row(self, row: Person, metadata: Meta) -> None:
        RAN.append(("fixable", "process", f"{row.name} {row.email} {row.age}"))
        if row.name == "boom":
            raise RuntimeError("exploded on purpose")


@bo.operation("fixable-gated", track_row_data=True)
class FixableGated(bo.RowOperation[Meta, Person]):
    async def process_row(self, row: Person, metadata: Meta) -> None:
        global GATE
        if row.name == "wait":
            GATE = GATE or asyncio.Event()
            await GATE.wait()
        if row.name == "boom":
            raise RuntimeError("exploded on purpose")


@bo.operation("fixable-steps", retryable=True, track_row_data=True)
class FixableSteps(bo.PipelineOperation[Meta, Person]):
    async def validate_row(self, row: Person, metadata: Meta) -> None:
        await _check(row, metadata)

    @bo.step("Reserve", order=1)
    async def reserve(self, row: Person, metadata: Meta) -> None:
        RAN.append(("fixable-steps", "Reserve", row.name))

    @bo.step("Send", order=2, allow_operation_retry=False)
    async def send(self, row: Person, metadata: Meta) -> None:
        RAN.append(("fixable-steps", "Send", row.name))
        if row.age is not None and row.age < 0:
            raise RuntimeError("cannot send to a negative age")


@bo.operation("fixable-batch", batch_size=2, track_row_data=True)
class FixableBatch(bo.BatchOperation[Meta, Person]):
    async def process_batch(self, rows: list[Person], metadata: Meta) -> list[str | None]:
        RAN.extend(("fixable-batch", "batch", row.name) for row in rows)
        return [None for _ in rows]


@bo.operation("plain-rows", retryable=True)
class PlainRows(bo.RowOperation[Meta, Person]):
    """Keeps no row data: its rows cannot be fixed."""

    async def process_row(self, row: Person, metadata: Meta) -> None:
        RAN.append(("plain-rows", "process", row.name))


ALL = [Fixable, FixableGated, FixableSteps, FixableBatch, PlainRows]
