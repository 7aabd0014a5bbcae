"""Undo in the definition layer, the plan of a row's undos, and the refusals."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

import bulkops as bo
from bulkops.definition.operation import build_definition
from bulkops.engine.undo_plan import undo_plan
from bulkops.errors import DefinitionError
from bulkops.service.undo import _refusal
from bulkops.storage.records import OperationRecord, RowRecord, StepState
from bulkops.storage.states import OperationStatus, RowState


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


class Pipeline(bo.PipelineOperation[Meta, Item]):
    @bo.step("One", order=1)
    async def one(self, row: Item, metadata: Meta) -> None: ...

    @bo.step("Two", order=2)
    async def two(self, row: Item, metadata: Meta) -> None: ...

    @bo.step("Three", order=3)
    async def three(self, row: Item, metadata: Meta) -> None: ...

    @bo.undo_step("three")  # names are matched case-insensitively
    def undo_three(self, row: Item, metadata: Meta) -> None: ...

    @bo.undo_step("One")
    async def undo_one(self, row: Item, metadata: Meta) -> None: ...


class Rows(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None: ...

    async def undo_row(self, row: Item, metadata: Meta) -> None: ...


class Plain(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None: ...


class Batch(bo.BatchOperation[Meta, Item]):
    async def process_batch(self, rows: list[Item], metadata: Meta) -> None: ...

    def undo_row(self, row: Item, metadata: Meta) -> None: ...


def test_undo_steps_are_registered_on_their_steps() -> None:
    definition = build_definition(Pipeline, "p")
    assert [(s.name, s.undo_name) for s in definition.steps] == [
        ("One", "undo_one"),
        ("Two", None),
        ("Three", "undo_three"),
    ]
    assert definition.undoable
    assert build_definition(Rows, "r").undoable
    assert build_definition(Batch, "b").undoable
    assert not build_definition(Plain, "plain").undoable
    # The decorated method still behaves as the method.
    assert Pipeline().undo_three(Item(name="x"), Meta()) is None


def test_an_undo_of_an_unknown_step_or_two_undos_of_one_step_are_refused() -> None:
    class Unknown(Pipeline):
        @bo.undo_step("Four")
        def undo_four(self, row: Item, metadata: Meta) -> None: ...

    with pytest.raises(DefinitionError, match="names no step"):
        build_definition(Unknown, "u")

    class Twice(Pipeline):
        @bo.undo_step("One")
        def undo_one_again(self, row: Item, metadata: Meta) -> None: ...

    with pytest.raises(DefinitionError, match="two @undo_step"):
        build_definition(Twice, "t")
    with pytest.raises(DefinitionError):
        bo.undo_step("  ")

    class PipelineWithUndoRow(Pipeline):
        async def undo_row(self, row: Item, metadata: Meta) -> None: ...

    with pytest.raises(DefinitionError, match="not undo_row"):
        build_definition(PipelineWithUndoRow, "w")

    class RowsWithUndoStep(Plain):
        @bo.undo_step("process")
        def undo_process(self, row: Item, metadata: Meta) -> None: ...

    with pytest.raises(DefinitionError, match="define undo_row instead"):
        build_definition(RowsWithUndoStep, "x")


def _row(state: RowState, done: tuple[int, ...] = ()) -> RowRecord:
    names = ("One", "Two", "Three")
    steps = [
        StepState(name, index, RowState.COMPLETED if index in done else RowState.PENDING)
        for index, name in enumerate(names)
    ]
    return RowRecord(uuid.uuid4(), 1, state, steps=steps)


def test_a_row_undoes_its_completed_undoable_steps_in_reverse_order() -> None:
    definition = build_definition(Pipeline, "p")
    names = [s.name for s in undo_plan(definition, _row(RowState.COMPLETED))]
    assert names == ["Three", "One"]
    assert [s.name for s in undo_plan(definition, _row(RowState.FAILED, (0, 1)))] == ["One"]
    assert undo_plan(definition, _row(RowState.FAILED, (1,))) == []
    assert undo_plan(definition, _row(RowState.FAILED)) == []
    rows = build_definition(Rows, "r")
    assert [s.name for s in undo_plan(rows, RowRecord(uuid.uuid4(), 1, RowState.COMPLETED))] == [
        "process"
    ]
    assert undo_plan(rows, RowRecord(uuid.uuid4(), 1, RowState.FAILED)) == []


def test_refusals() -> None:
    definition = build_definition(Rows, "r")
    record = OperationRecord(
        id=uuid.uuid4(),
        operation_name="r",
        status=OperationStatus.RUNNING,
        created_by="a",
        created_at=datetime.now(UTC),
        source="api",
        file_id="f",
        file_name="f.csv",
        file_size=1,
        file_format="csv",
        metadata={},
    )
    assert "only a finished operation" in (_refusal(record, definition) or "")
    done = replace(record, status=OperationStatus.COMPLETED)
    assert _refusal(done, definition) is None
    assert "defines no undo" in (_refusal(done, build_definition(Plain, "plain")) or "")
    assert "not registered" in (_refusal(done, None) or "")
    undone = replace(done, undone_by=uuid.uuid4())
    assert str(undone.undone_by) in (_refusal(undone, definition) or "")
    assert "cannot be undone" in (_refusal(replace(done, undo_of=uuid.uuid4()), definition) or "")
    assert "dry run" in (_refusal(replace(done, dry_run=True), definition) or "")


def test_row_context_says_undo_and_defaults_to_false() -> None:
    context = bo.RowContext(uuid.uuid4(), "r", 1, None, "process", 0, 1, 0, "a")
    assert context.undo is False
    assert context.idempotency_key == f"{context.operation_id}:1:0"
