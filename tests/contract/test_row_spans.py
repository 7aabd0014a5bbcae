"""Plain successful rows are written in spans; what is stored must not differ."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from bulkops.definition.operation import PROCESS_STEP
from bulkops.storage import lifecycle
from bulkops.storage.records import (
    CompletedSpan,
    ProgressDelta,
    RetryRequest,
    RowQuery,
    RowRecord,
    report_values,
)
from bulkops.storage.sql import pages as sql_pages
from bulkops.storage.sql.schema import row_records, row_spans
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


async def _mixed_operation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> tuple[object, list[RowRecord]]:
    """An operation of 300 rows written in three saves: plain completions (stored in spans
    on SQL) around failed rows, rows with a business key and gaps, out of order."""
    op = make_operation()
    await stores.operations.add(op)
    rows: list[RowRecord] = []
    for number in range(1, 301):
        if number % 37 == 0 or number in (149, 150):
            continue  # never recorded (still running, say)
        if number % 11 == 0:
            row = make_row(op.id, number, state=RowState.FAILED, error_type=ErrorType.PROCESSING)
        elif number % 29 == 0:
            row = make_row(op.id, number, row_id=f"key-{number}")
        else:
            row = plain(make_row, op.id, number, millis=number // 40)
        rows.append(row)
    for part in (rows[200:], rows[:90], rows[90:200]):
        await stores.rows.save(op.id, part, ProgressDelta(len(part), len(part), 0))
    return op.id, rows


@pytest.mark.parametrize("few_stored", [10_000, 0])
async def test_pages_counts_and_reads_see_spans_and_stored_rows_in_row_order(
    stores: Stores,
    make_operation: MakeOperation,
    make_row: MakeRow,
    few_stored: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every read of rows sees a span's rows as the Completed records they stand for,
    merged with the stored rows in row order: pages at every offset, keyset pages, the
    state and step filters, one row, the counts, and the batch reads at any batch size.
    With ``few_stored`` 0 a page's offset is located by counting the stored rows."""
    monkeypatch.setattr(sql_pages, "_FEW_OTHERS", few_stored)
    operation_id, rows = await _mixed_operation(stores, make_operation, make_row)
    by_number = {row.row_number: row for row in rows}
    completed = [r for r in rows if r.state is RowState.COMPLETED]
    wanted = {
        RowQuery(operation_id, page_size=7): rows,
        RowQuery(operation_id, page_size=7, state=RowState.COMPLETED): completed,
        RowQuery(operation_id, page_size=7, step_name=PROCESS_STEP): [
            r for r in rows if r.step_name == PROCESS_STEP
        ],
        RowQuery(operation_id, page_size=7, failed_only=True): [
            r for r in rows if r.state is RowState.FAILED
        ],
    }
    for query, expected in wanted.items():
        pages = -(-len(expected) // query.page_size)
        for number in (1, 2, pages // 2, pages, pages + 1):
            page = await stores.rows.page(replace(query, page=number))
            start = (number - 1) * query.page_size
            assert page.items == expected[start : start + query.page_size], (query, number)
            assert page.total_count == len(expected)
        after, seen = 0, []
        while True:
            page = await stores.rows.page(replace(query, after=after))
            seen += page.items
            if page.next_after is None:
                break
            after = page.next_after
        assert seen == expected
    assert (await stores.rows.page(RowQuery(operation_id, row_number=100))).items == [
        by_number[100]
    ]
    for number in (1, 36, 37, 100, 150, 300, 301):
        assert await stores.rows.get_row(operation_id, number) == by_number.get(number)
    counts = await stores.operations.counts(operation_id)
    assert (counts.completed, counts.failed) == (len(completed), len(rows) - len(completed))
    for size in (1, 5, 64, 1000):
        read = [r async for r in stores.rows.iterate(operation_id, batch_size=size)]
        assert read == rows
        states = (RowState.COMPLETED,)
        done = [r async for r in stores.rows.iterate(operation_id, batch_size=size, states=states)]
        assert done == completed
        reports = [
            v async for b in stores.rows.report_batches(operation_id, batch_size=size) for v in b
        ]
        assert reports == [report_values(r) for r in rows]
        outcomes = [
            o async for b in stores.rows.outcome_batches(operation_id, batch_size=size) for o in b
        ]
        assert [o.row_number for o in outcomes] == [r.row_number for r in rows]
        assert [o.state for o in outcomes] == [r.state for r in rows]


async def test_plain_completions_are_stored_one_row_per_span(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """On SQL, 10,000 plain completions in one save are one ``row_spans`` row, not
    10,000 row records."""
    if stores.database is None:
        pytest.skip("how rows are stored is a SQL matter")
    op = make_operation()
    await stores.operations.add(op)
    rows = [plain(make_row, op.id, n, millis=0) for n in range(1, 10_001)]
    await stores.rows.save(op.id, rows, ProgressDelta(len(rows), len(rows), 0))
    async with stores.database.read() as conn:
        key = op.id if stores.kind == "postgres" else str(op.id)
        records = await conn.execute(
            select(func.count()).select_from(row_records).where(row_records.c.operation_id == key)
        )
        spans = await conn.execute(select(row_spans).where(row_spans.c.operation_id == key))
        assert records.scalar_one() == 0
        assert [(s.first_row, s.last_row) for s in spans] == [(1, 10_000)]
    assert (await stores.operations.counts(op.id)).completed == 10_000


async def test_a_restart_runs_the_rows_of_spans_again(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """A restart with Completed rows resets the rows of spans like stored ones, and
    nothing of them is left as Completed."""
    op = make_operation()
    await stores.operations.add(op)
    claimed = await stores.operations.apply(lifecycle.claim(op, "w", BASE_TIME))
    assert claimed is not None
    rows = [plain(make_row, op.id, n, millis=0) for n in range(1, 51)]
    rows[9] = make_row(op.id, 10, state=RowState.FAILED, error_type=ErrorType.PROCESSING)
    await stores.rows.save(op.id, rows, ProgressDelta(50, 49, 1))
    finished = await stores.operations.apply(
        lifecycle.finish(claimed, lifecycle.RowCounts(49, 1), BASE_TIME)
    )
    assert finished is not None
    request = RetryRequest(
        op.id, finished.version, (0,), from_step=0, include_completed=True, actor="bob"
    )
    started = await stores.retries.begin_retry(request, BASE_TIME + timedelta(minutes=1))
    assert started is not None and started.rows_reset == 50
    after = [r async for r in stores.rows.iterate(op.id)]
    assert [r.row_number for r in after] == list(range(1, 51))
    assert {(r.state, r.retry_attempt) for r in after} == {(RowState.PENDING, 1)}
    assert (await stores.operations.counts(op.id)).completed == 0
