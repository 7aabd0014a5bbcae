"""``RowStore.outcome_batches``: what each row did, as an undo reads it, the same on every
store as the records ``iterate`` gives."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from bulkops.storage.records import (
    CompletedSpan,
    OperationRecord,
    ProgressDelta,
    RowOutcome,
    RowRecord,
    RowWrite,
    StepState,
)
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores


def _outcome(row: RowRecord) -> RowOutcome:
    return RowOutcome(row.row_number, row.state, row.row_id, row.row_data, row.steps)


async def _rows(stores: Stores, op: OperationRecord, make_row: MakeRow) -> list[RowRecord]:
    """Rows of every kind an undo meets: plain completions stored as a span, a completed
    row with its data and key, a failed one, and a pipeline's row stopped part way."""
    part_way = make_row(
        op.id,
        3,
        state=RowState.FAILED,
        step_index=1,
        step_name="Two",
        error_type=ErrorType.STEP_FAILURE,
        error_message="boom",
        row_data={"name": "c", "lines": [{"qty": 2}]},
        steps=[
            StepState("One", 0, state=RowState.COMPLETED, attempts=1, completed_at=BASE_TIME),
            StepState("Two", 1, state=RowState.FAILED, attempts=2),
        ],
    )
    kept = make_row(op.id, 4, row_data={"name": "d"})
    failed = make_row(
        op.id, 5, state=RowState.FAILED, error_type=ErrorType.PROCESSING, error_message="x"
    )
    records = [part_way, kept, failed]
    span = CompletedSpan(6, 9, "process", BASE_TIME + timedelta(seconds=1))
    write = RowWrite(op.id, records, ProgressDelta(7, 5, 2), completed=[span])
    assert await stores.rows.save_many([write]) == [OperationStatus.RUNNING]
    await stores.rows.save(
        op.id, [make_row(op.id, n, row_id=None) for n in (1, 2)], ProgressDelta()
    )
    return [r async for r in stores.rows.iterate(op.id)]


@pytest.mark.parametrize("states", [None, (RowState.COMPLETED,), (RowState.FAILED,)])
async def test_outcome_batches_hold_what_iterate_s_records_say(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, states: Any
) -> None:
    op = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(op)
    every = await _rows(stores, op, make_row)
    assert [r.row_number for r in every] == list(range(1, 10))

    batches = [b async for b in stores.rows.outcome_batches(op.id, batch_size=2, states=states)]
    expected = [_outcome(r) for r in every if states is None or r.state in states]
    assert [outcome for batch in batches for outcome in batch] == expected
    assert expected and all(len(batch) == 2 for batch in batches[:-1])
    assert all(isinstance(outcome.state, RowState) for batch in batches for outcome in batch)

    after = [o async for b in stores.rows.outcome_batches(op.id, after=4) for o in b]
    assert [o.row_number for o in after] == [5, 6, 7, 8, 9]
    assert after[1:] == [RowOutcome(n, RowState.COMPLETED, None, None, []) for n in range(6, 10)]
