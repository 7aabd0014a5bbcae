"""The rows an undo operation runs (``UndoSource``): which of the undone operation's rows,
with what data, and what a resumed run skips."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable

import bulkops as bo
from bulkops.definition.operation import build_definition
from bulkops.engine.resume import RowBatch, RowData, StoredRows
from bulkops.engine.undo import NO_DATA, UndoSource
from bulkops.formats import RawRow
from bulkops.storage.records import RowOutcome, RowRecord, StepState
from bulkops.storage.states import RowState

ORIGINAL, UNDO = uuid.uuid4(), uuid.uuid4()


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


class Rows(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None: ...

    async def undo_row(self, row: Item, metadata: Meta) -> None: ...


class Pipeline(bo.PipelineOperation[Meta, Item]):
    @bo.step("One", order=1)
    async def one(self, row: Item, metadata: Meta) -> None: ...

    @bo.step("Two", order=2)
    async def two(self, row: Item, metadata: Meta) -> None: ...

    @bo.undo_step("One")
    async def undo_one(self, row: Item, metadata: Meta) -> None: ...

    @bo.undo_step("Two")
    async def undo_two(self, row: Item, metadata: Meta) -> None: ...


async def _records(records: Iterable[RowRecord]) -> AsyncIterator[RowRecord]:
    for record in records:
        yield record


async def _outcomes(records: list[RowRecord]) -> AsyncIterator[list[RowOutcome]]:
    """The records' outcomes in batches of two, as ``RowStore.outcome_batches`` gives them."""
    outcomes = [RowOutcome(r.row_number, r.state, r.row_id, r.row_data, r.steps) for r in records]
    for start in range(0, len(outcomes), 2):
        yield outcomes[start : start + 2]


def _record(operation: uuid.UUID, number: int, state: RowState) -> RowRecord:
    return RowRecord(operation_id=operation, row_number=number, state=state)


async def _batches(source: UndoSource) -> RowBatch:
    return [pair async for batch in source for pair in batch]


async def test_a_row_operations_rows_come_with_their_file_data_and_no_pending_record() -> None:
    definition = build_definition(Rows, "rows")
    originals = [
        _record(ORIGINAL, 1, RowState.COMPLETED),
        _record(ORIGINAL, 2, RowState.FAILED),  # did nothing: nothing to undo
        _record(ORIGINAL, 3, RowState.COMPLETED),
        _record(ORIGINAL, 5, RowState.COMPLETED),  # not in the file any more
    ]
    kept = _record(ORIGINAL, 4, RowState.COMPLETED)
    kept.row_data = {"name": "kept"}
    originals.insert(3, kept)
    file = iter([RawRow(n, {"name": f"r{n}"}, {"name": f"r{n}"}) for n in (1, 2, 3, 4)])
    data = RowData(definition, drop_empty=True)
    source = UndoSource(UNDO, definition, _outcomes(originals), None, file, data)
    pairs = await _batches(source)
    assert [(raw.number, raw.values, existing) for raw, existing in pairs] == [
        (1, {"name": "r1"}, None),
        (3, {"name": "r3"}, None),
        (4, {"name": "kept"}, None),  # its kept data, not the file's
        (5, None, None),
    ]
    assert pairs[-1][0].error == NO_DATA


async def test_a_resumed_undo_skips_the_rows_it_recorded_final() -> None:
    definition = build_definition(Rows, "rows")
    originals = [_record(ORIGINAL, n, RowState.COMPLETED) for n in range(1, 7)]
    done = [
        _record(UNDO, 1, RowState.COMPLETED),
        _record(UNDO, 2, RowState.FAILED),
        _record(UNDO, 4, RowState.RUNNING),  # not final: its undo runs again
        _record(UNDO, 5, RowState.COMPLETED),
    ]
    stored = StoredRows(_records(done[1:]), done[0])
    file = iter([RawRow(n, {"name": f"r{n}"}, {"name": f"r{n}"}) for n in range(1, 7)])
    data = RowData(definition, drop_empty=True)
    source = UndoSource(UNDO, definition, _outcomes(originals), stored, file, data)
    assert [raw.number for raw, _ in await _batches(source)] == [3, 4, 6]


async def test_a_pipelines_rows_come_with_the_steps_to_undo_last_first() -> None:
    definition = build_definition(Pipeline, "pipeline")
    part = _record(ORIGINAL, 2, RowState.FAILED)
    part.steps = [
        StepState("One", 0, state=RowState.COMPLETED),
        StepState("Two", 1, state=RowState.FAILED),
    ]
    originals = [_record(ORIGINAL, 1, RowState.COMPLETED), part]
    for record in originals:
        record.row_data = {"name": f"r{record.row_number}"}
    data = RowData(definition, drop_empty=True)
    source = UndoSource(UNDO, definition, _outcomes(originals), None, None, data)
    pairs = await _batches(source)
    plans = []
    for raw, pending in pairs:
        assert pending is not None
        assert (pending.operation_id, pending.state, pending.row_data) == (
            UNDO,
            RowState.PENDING,
            {"name": f"r{raw.number}"},
        )
        plans.append([(step.name, step.index) for step in pending.steps])
    assert plans == [[("Two", 1), ("One", 0)], [("One", 0)]]
