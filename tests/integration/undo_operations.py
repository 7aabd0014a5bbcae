"""Operations for the tests of undo: each call (forward and undo) is logged with what
``current_row()`` said, so a test sees which undos ran, in what order, with what data."""

from __future__ import annotations

from dataclasses import dataclass

import bulkops as bo


@dataclass(frozen=True)
class Call:
    """One call of a step, ``process_row`` or an undo."""

    operation: str
    what: str  # "do" or "undo"
    step: str | None
    step_index: int
    row_number: int
    value: str
    undo: bool
    key: str
    attempt: int


CALLS: list[Call] = []
FLAKY: set[str] = set()  # values whose undo fails once, then succeeds


def reset() -> None:
    CALLS.clear()
    FLAKY.clear()


def _log(operation: str, what: str, value: str) -> None:
    context = bo.current_row()
    CALLS.append(
        Call(
            operation,
            what,
            context.step_name,
            context.step_index,
            context.row_number,
            value,
            context.undo,
            context.idempotency_key,
            context.attempt,
        )
    )


def undos(operation: str) -> list[Call]:
    """The undo calls of ``operation``, in the order they ran."""
    return [call for call in CALLS if call.operation == operation and call.what == "undo"]


class Meta(bo.Metadata):
    note: str = ""


class Item(bo.Row):
    name: str
    value: str = ""


@bo.operation("undo-pipeline", retryable=True)
class UndoPipeline(bo.PipelineOperation[Meta, Item]):
    """Three steps: the first and the last can be undone; 'bad' rows fail at the last."""

    @bo.step("Create account", order=1)
    async def create(self, row: Item, metadata: Meta) -> None:
        _log("undo-pipeline", "do", row.name)

    @bo.step("Send email", order=2)
    def email(self, row: Item, metadata: Meta) -> None:
        _log("undo-pipeline", "do", row.name)

    @bo.step("Grant access", order=3)
    async def grant(self, row: Item, metadata: Meta) -> None:
        _log("undo-pipeline", "do", row.name)
        if row.name.startswith("bad"):
            raise RuntimeError("no access for bad rows")

    @bo.undo_step("Create account")
    def delete_account(self, row: Item, metadata: Meta) -> None:
        _log("undo-pipeline", "undo", f"{row.name}:{row.value}")

    @bo.undo_step("Grant access")
    async def revoke(self, row: Item, metadata: Meta) -> None:
        _log("undo-pipeline", "undo", f"{row.name}:{row.value}")
        if row.name in FLAKY:
            FLAKY.discard(row.name)
            raise RuntimeError("revoke failed once")


@bo.operation("undo-rows", retryable=True, track_row_data=True)
class UndoRows(bo.RowOperation[Meta, Item]):
    """Rows named 'fail' fail; a fixed row runs with its fixed data."""

    async def process_row(self, row: Item, metadata: Meta) -> None:
        _log("undo-rows", "do", f"{row.name}:{row.value}")
        if row.value == "fail":
            raise RuntimeError("failed on purpose")

    async def undo_row(self, row: Item, metadata: Meta) -> None:
        _log("undo-rows", "undo", f"{row.name}:{row.value}")
        if row.name in FLAKY:
            FLAKY.discard(row.name)
            raise RuntimeError("undo failed once")


@bo.operation("undo-plain")
class UndoPlain(bo.RowOperation[Meta, Item]):
    """No row data kept: its undo reads the file."""

    async def process_row(self, row: Item, metadata: Meta) -> None:
        _log("undo-plain", "do", f"{row.name}:{row.value}")

    def undo_row(self, row: Item, metadata: Meta) -> None:
        _log("undo-plain", "undo", f"{row.name}:{row.value}")
        if row.name in FLAKY:
            FLAKY.discard(row.name)
            raise RuntimeError("undo failed once")


@bo.operation("undo-batch", batch_size=2)
class UndoBatch(bo.BatchOperation[Meta, Item]):
    """A batch operation: its undo runs row by row."""

    async def process_batch(self, rows: list[Item], metadata: Meta) -> list[str | None] | None:
        return ["failed on purpose" if row.value == "fail" else None for row in rows]

    async def undo_row(self, row: Item, metadata: Meta) -> None:
        _log("undo-batch", "undo", f"{row.name}:{row.value}")


@bo.operation("no-undo")
class NoUndo(bo.RowOperation[Meta, Item]):
    """Defines no undo."""

    async def process_row(self, row: Item, metadata: Meta) -> None:
        _log("no-undo", "do", row.name)


ALL = [UndoPipeline, UndoRows, UndoPlain, UndoBatch, NoUndo]
