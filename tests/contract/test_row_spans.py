"""Plain successful rows are written in spans; what is stored must not differ."""

from __future__ import annotations

from datetime import timedelta

from bulkops.definition.operation import PROCESS_STEP
from bulkops.storage.records import CompletedSpan, ProgressDelta, RowQuery, RowRecord
from bulkops.storage.states import ErrorType, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores


def plain(make_row: MakeRow, operation_id: object, number: int, millis: int) -> RowRecord:
    return make_row(
        operation_id,
        number,
        row_id=None,
        completed_at=BASE_TIME + timedelta(milliseconds=millis),
    )


async def test_spans_of_plain_rows_round_trip_exactly(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    rows = [plain(make_row, op.id, n, millis=n // 10) for n in range(1, 101)]  # 10 per stamp
    rows[40] = make_row(op.id, 41, row_id="with-id")  # breaks a span
    rows[60] = make_row(
        op.id, 61, state=RowState.FAILED, error_type=ErrorType.PROCESSING, error_message="x"
    )
    del rows[80]  # a gap: row 81 is absent
    rows.append(plain(make_row, op.id, 500, millis=1))
    status = await stores.rows.save(op.id, rows, ProgressDelta(len(rows), len(rows) - 1, 1))
    assert status is not None
    for row in rows:
        assert await stores.rows.get_row(op.id, row.row_number) == row
    assert await stores.rows.get_row(op.id, 81) is None
    page = await stores.rows.page(RowQuery(operation_id=op.id, page=1, page_size=1000))
    assert [r.row_number for r in page.items] == sorted(r.row_number for r in rows)
    record = await stores.operations.get(op.id)
    assert record is not None and record.processed_rows == len(rows)


async def test_plain_rows_overwrite_earlier_records(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    failed = [
        make_row(
            op.id,
            n,
            state=RowState.FAILED,
            error_type=ErrorType.STEP_FAILURE,
            error_message="boom",
            row_data={"a": 1},
            step_name="other",
        )
        for n in range(1, 6)
    ]
    await stores.rows.save(op.id, failed, ProgressDelta())
    again = [plain(make_row, op.id, n, millis=0) for n in range(1, 6)]
    await stores.rows.save(op.id, again, ProgressDelta())
    for row in again:
        stored = await stores.rows.get_row(op.id, row.row_number)
        assert stored == row
        assert stored is not None and stored.row_data is None and stored.error_type is None


async def test_a_batch_repeating_a_row_keeps_the_last_write(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    first = plain(make_row, op.id, 1, millis=0)
    last = make_row(op.id, 1, state=RowState.FAILED, error_type=ErrorType.TIMEOUT)
    await stores.rows.save(op.id, [first, last], ProgressDelta())
    assert await stores.rows.get_row(op.id, 1) == last


async def test_completed_spans_over_stored_rows_replace_them_and_write_the_rest(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    stale = make_row(op.id, 5, state=RowState.RUNNING, row_data={"a": 1}, completed_at=None)
    await stores.rows.save(op.id, [stale], ProgressDelta())
    at = BASE_TIME + timedelta(seconds=3)

    status = await stores.rows.save(
        op.id,
        [],
        ProgressDelta(10, 10, 0),
        completed=[CompletedSpan(1, 6, PROCESS_STEP, at), CompletedSpan(7, 10, PROCESS_STEP, at)],
    )

    assert status is not None
    expected = [plain(make_row, op.id, n, millis=3000) for n in range(1, 11)]
    assert [await stores.rows.get_row(op.id, n) for n in range(1, 11)] == expected
    record = await stores.operations.get(op.id)
    assert record is not None and record.processed_rows == 10


async def test_completed_spans_of_a_dry_run_are_stored_at_the_validation_step(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation(dry_run=True)
    await stores.operations.add(op)
    at = BASE_TIME + timedelta(seconds=3)
    spans = [CompletedSpan(1, 3, "validation", at, -1), CompletedSpan(4, 4, PROCESS_STEP, at)]
    assert await stores.rows.save(op.id, [], ProgressDelta(4, 4, 0), completed=spans)
    rows = [await stores.rows.get_row(op.id, n) for n in range(1, 5)]
    assert [(r.state, r.step_index, r.step_name) for r in rows if r is not None] == [
        (RowState.COMPLETED, -1, "validation"),
        (RowState.COMPLETED, -1, "validation"),
        (RowState.COMPLETED, -1, "validation"),
        (RowState.COMPLETED, 0, PROCESS_STEP),
    ]
    listed = await stores.rows.page(RowQuery(op.id, step_name="validation", page_size=10))
    assert [r.row_number for r in listed.items] == [1, 2, 3]
