"""RowStore contract: the same behaviour on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bulkops.errors import StorageError
from bulkops.storage import lifecycle
from bulkops.storage.records import (
    Fence,
    OperationRecord,
    ProgressDelta,
    RowQuery,
    RowRecord,
    StepState,
    report_values,
)
from bulkops.storage.sql import Database, SqlStore, migrate
from bulkops.storage.sql.bulk import COPY_MIN_ROWS
from bulkops.storage.sql.codec import (
    ROW_COLUMNS,
    check_records_match_tables,
    postgres_timestamp,
    row_decoder,
    row_encoder,
)
from bulkops.storage.states import ErrorType, EventType, OperationStatus, RowState

if TYPE_CHECKING:
    from tests.contract.conftest import Stores

MakeOperation = Callable[..., OperationRecord]
MakeRow = Callable[..., RowRecord]
T0 = datetime(2024, 6, 1, 12, 0, 0, 654321, tzinfo=UTC)
NO_DELTA = ProgressDelta()


async def _running(stores: Stores, make_operation: MakeOperation) -> OperationRecord:
    record = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(record)
    return record


def _pipeline_row(operation_id: uuid.UUID, row_number: int) -> RowRecord:
    return RowRecord(
        operation_id=operation_id,
        row_number=row_number,
        state=RowState.WAITING_FOR_COMPLETION,
        row_id="order-17",
        step_index=1,
        step_name="charge",
        error_type=ErrorType.TIMEOUT,
        error_message="previous attempt timed out",
        retry_attempt=2,
        signal_key="charge:order-17",
        row_data={"orderId": "order-17", "amount": 12.5, "lines": [{"sku": "x", "qty": 2}]},
        steps=[
            StepState(
                name="reserve",
                index=0,
                state=RowState.COMPLETED,
                attempts=1,
                started_at=T0,
                completed_at=T0 + timedelta(seconds=1),
            ),
            StepState(
                name="charge",
                index=1,
                state=RowState.WAITING_FOR_COMPLETION,
                attempts=3,
                started_at=T0 + timedelta(seconds=2),
                error_type=ErrorType.TIMEOUT,
                error_message="gateway slow",
                signal_key="charge:order-17",
            ),
        ],
        waiting_since=T0 + timedelta(seconds=2, microseconds=5),
        completed_at=None,
    )


async def test_save_then_get_round_trips_every_field(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    pipeline = _pipeline_row(op.id, 1)
    plain = make_row(op.id, 2)
    invalid = make_row(
        op.id,
        3,
        state=RowState.FAILED,
        step_index=-1,
        step_name=None,
        error_type=ErrorType.VALIDATION,
        error_message="email: not an email",
        row_data={"email": "nope"},
    )

    await stores.rows.save(op.id, [pipeline, plain, invalid], NO_DELTA)

    assert await stores.rows.get_row(op.id, 1) == pipeline
    assert await stores.rows.get_row(op.id, 2) == plain
    assert await stores.rows.get_row(op.id, 3) == invalid
    got = await stores.rows.get_row(op.id, 2)
    assert got is not None and got.steps == [] and got.row_data is None
    assert got.completed_at is not None and got.completed_at.utcoffset() == timedelta(0)


async def test_get_unknown_row_is_none(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    await stores.rows.save(op.id, [make_row(op.id, 1)], NO_DELTA)

    assert await stores.rows.get_row(op.id, 2) is None
    assert await stores.rows.get_row(uuid.uuid4(), 1) is None


async def test_save_adds_the_delta_and_returns_the_status(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)

    first = await stores.rows.save(
        op.id, [make_row(op.id, n) for n in (1, 2)], ProgressDelta(2, 1, 1)
    )
    second = await stores.rows.save(op.id, [make_row(op.id, 3)], ProgressDelta(1, 1, 0))
    third = await stores.rows.save(op.id, [], ProgressDelta(0, 0, 4))

    assert first is second is third is OperationStatus.RUNNING
    got = await stores.operations.get(op.id)
    assert got is not None
    assert (got.processed_rows, got.successful_rows, got.error_count) == (3, 2, 5)
    assert got.version == op.version  # counters are not a status change


async def test_save_reports_a_cancellation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    await stores.operations.apply(lifecycle.cancel(op, T0))

    status = await stores.rows.save(op.id, [make_row(op.id, 1)], ProgressDelta(1, 1, 0))

    assert status is OperationStatus.CANCELLED


async def test_save_writes_its_events_with_the_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    failed = make_row(op.id, 2, state=RowState.FAILED, error_type=ErrorType.PROCESSING)
    event = lifecycle.row_failed_event(op, failed, T0)

    await stores.rows.save(op.id, [make_row(op.id, 1), failed], ProgressDelta(2, 1, 1), [event])

    (stored,) = await stores.events.read(after=0, limit=10)
    assert stored.type is EventType.ROW_FAILED and stored.message == event.message


async def test_save_is_fenced_to_the_worker_holding_the_operation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation(status=OperationStatus.RUNNING, worker_id="holder")
    await stores.operations.add(op)
    event = lifecycle.row_failed_event(op, make_row(op.id, 1), T0)

    late = await stores.rows.save(
        op.id, [make_row(op.id, 1)], ProgressDelta(1, 1, 0), [event], fence=Fence("former")
    )
    held = await stores.rows.save(
        op.id, [make_row(op.id, 2)], ProgressDelta(1, 1, 0), fence=Fence("holder")
    )

    assert late is None and held is OperationStatus.RUNNING
    assert await stores.rows.get_row(op.id, 1) is None
    assert await stores.rows.get_row(op.id, 2) is not None
    got = await stores.operations.get(op.id)
    assert got is not None and got.processed_rows == 1
    assert await stores.events.read(after=0, limit=10) == []


async def test_save_for_unknown_operation_writes_nothing(stores: Stores, make_row: MakeRow) -> None:
    unknown = uuid.uuid4()

    status = await stores.rows.save(unknown, [make_row(unknown, 1)], ProgressDelta(1, 1, 0))

    assert status is None
    assert await stores.rows.get_row(unknown, 1) is None


async def test_save_refuses_rows_of_another_operation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    with pytest.raises(ValueError, match="belong"):
        await stores.rows.save(op.id, [make_row(uuid.uuid4(), 1)], NO_DELTA)


async def test_second_save_replaces_every_column(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    await stores.rows.save(op.id, [_pipeline_row(op.id, 1)], NO_DELTA)
    bare = RowRecord(operation_id=op.id, row_number=1, state=RowState.PENDING)

    await stores.rows.save(op.id, [bare], NO_DELTA)

    assert await stores.rows.get_row(op.id, 1) == bare
    # ...and back, including JSON columns
    await stores.rows.save(op.id, [_pipeline_row(op.id, 1)], NO_DELTA)
    assert await stores.rows.get_row(op.id, 1) == _pipeline_row(op.id, 1)


@pytest.mark.parametrize("with_steps", [False, True])
async def test_the_last_of_duplicate_row_numbers_in_one_batch_wins(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, with_steps: bool
) -> None:
    op = await _running(stores, make_operation)
    first = _pipeline_row(op.id, 5) if with_steps else make_row(op.id, 5, state=RowState.RUNNING)
    last = make_row(op.id, 5, state=RowState.FAILED, error_type=ErrorType.PROCESSING)

    await stores.rows.save(op.id, [first, make_row(op.id, 6), last], NO_DELTA)

    assert await stores.rows.get_row(op.id, 5) == last
    assert (await stores.rows.page(RowQuery(op.id))).total_count == 2


async def test_rows_are_stored_and_returned_as_copies(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await _running(stores, make_operation)
    row = _pipeline_row(op.id, 1)
    await stores.rows.save(op.id, [row], NO_DELTA)
    row.steps[0].state = RowState.FAILED
    assert row.row_data is not None
    row.row_data["amount"] = 0

    got = await stores.rows.get_row(op.id, 1)
    assert got == _pipeline_row(op.id, 1)
    assert got is not None and got.row_data is not None
    got.steps.clear()
    got.row_data.clear()
    assert await stores.rows.get_row(op.id, 1) == _pipeline_row(op.id, 1)


async def test_large_batch(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    rows = [make_row(op.id, n) for n in range(1, 2501)]

    await stores.rows.save(op.id, rows, ProgressDelta(2500, 2500, 0))

    got = await stores.operations.get(op.id)
    assert got is not None and got.processed_rows == 2500
    assert [r async for r in stores.rows.iterate(op.id)] == rows


async def test_large_batches_of_rich_rows_round_trip_and_replace(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    # Large enough for PostgreSQL's COPY path (COPY_MIN_ROWS), with JSON, failures,
    # waits and a row number given twice (the last wins).
    op = await _running(stores, make_operation)

    def rich(number: int, attempt: int) -> RowRecord:
        if number % 3 == 0:
            return replace(_pipeline_row(op.id, number), retry_attempt=attempt)
        if number % 3 == 1:
            return make_row(
                op.id,
                number,
                state=RowState.FAILED,
                error_type=ErrorType.PROCESSING,
                error_message=f"refused ({attempt})",
                retry_attempt=attempt,
            )
        return make_row(op.id, number, row_data={"n": number, "try": attempt}, row_id=None)

    size = 3 * COPY_MIN_ROWS
    first = [rich(n, 0) for n in range(1, size + 1)]
    await stores.rows.save(op.id, [*first, rich(7, 5)], NO_DELTA)
    expected = [rich(7, 5) if row.row_number == 7 else row for row in first]
    assert [r async for r in stores.rows.iterate(op.id)] == expected

    again = [rich(n, 1) for n in range(size, 0, -1)]  # every row replaced, out of order
    await stores.rows.save(op.id, again, NO_DELTA)
    assert [r async for r in stores.rows.iterate(op.id)] == again[::-1]


async def test_a_large_batch_postgres_refuses_writes_nothing(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    if stores.kind != "postgres":
        pytest.skip("only PostgreSQL enforces the row id's length")
    op = await _running(stores, make_operation)
    rows = [make_row(op.id, n, row_id="x" * 201) for n in range(1, COPY_MIN_ROWS + 1)]

    with pytest.raises(StorageError, match="too long"):
        await stores.rows.save(op.id, rows, ProgressDelta(len(rows), len(rows), 0))

    got = await stores.operations.get(op.id)
    assert got is not None and got.processed_rows == 0
    assert [r async for r in stores.rows.iterate(op.id)] == []
    # The session's staging table is still there for the next batch.
    fine = [make_row(op.id, n) for n in range(1, COPY_MIN_ROWS + 1)]
    await stores.rows.save(op.id, fine, NO_DELTA)
    assert [r async for r in stores.rows.iterate(op.id)] == fine


async def _save_mixed(stores: Stores, op: OperationRecord, make_row: MakeRow) -> None:
    rows = [
        make_row(op.id, 1),
        make_row(op.id, 2, state=RowState.FAILED, error_type=ErrorType.VALIDATION, step_index=-1),
        make_row(op.id, 3, state=RowState.PENDING, completed_at=None),
        make_row(op.id, 4, state=RowState.FAILED, error_type=ErrorType.STEP_FAILURE),
        make_row(op.id, 5, state=RowState.RUNNING, step_name="charge"),
        make_row(op.id, 6, state=RowState.WAITING_FOR_COMPLETION, step_name="charge"),
        make_row(op.id, 7, state=RowState.FAILED, error_type=ErrorType.TIMEOUT, step_name="charge"),
        make_row(op.id, 8),
    ]
    # Saved out of order and in two batches: listing is by row number regardless.
    await stores.rows.save(op.id, rows[4:], NO_DELTA)
    await stores.rows.save(op.id, rows[:4], NO_DELTA)


async def test_page_orders_by_row_number_and_filters(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    other = await _running(stores, make_operation)
    await _save_mixed(stores, op, make_row)
    await stores.rows.save(other.id, [make_row(other.id, 1, state=RowState.FAILED)], NO_DELTA)

    async def numbers(**filters: object) -> list[int]:
        page = await stores.rows.page(RowQuery(op.id, page_size=50, **filters))  # type: ignore[arg-type]
        assert page.total_count == len(page.items)
        return [r.row_number for r in page.items]

    assert await numbers() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert await numbers(failed_only=True) == [2, 4, 7]
    assert await numbers(state=RowState.FAILED) == [2, 4, 7]
    assert await numbers(state=RowState.WAITING_FOR_COMPLETION) == [6]
    assert await numbers(error_type=ErrorType.STEP_FAILURE) == [4]
    assert await numbers(row_number=5) == [5]
    assert await numbers(row_number=99) == []
    assert await numbers(step_name="charge") == [5, 6, 7]
    assert await numbers(step_name="CHARGE") == []
    assert await numbers(step_name="charge", failed_only=True) == [7]
    assert await numbers(failed_only=True, state=RowState.COMPLETED) == []


async def test_page_pages(stores: Stores, make_operation: MakeOperation, make_row: MakeRow) -> None:
    op = await _running(stores, make_operation)
    await _save_mixed(stores, op, make_row)

    second = await stores.rows.page(RowQuery(op.id, page=2, page_size=3))
    last = await stores.rows.page(RowQuery(op.id, page=3, page_size=3))

    assert [r.row_number for r in second.items] == [4, 5, 6]
    assert second.total_count == 8 and second.has_next_page
    assert [r.row_number for r in last.items] == [7, 8] and not last.has_next_page
    with pytest.raises(ValueError, match="at least 1"):
        await stores.rows.page(RowQuery(op.id, page=0))


@pytest.mark.parametrize("batch_size", [1, 3, 4, 1000])
async def test_iterate_yields_every_row_in_order(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, batch_size: int
) -> None:
    op = await _running(stores, make_operation)
    other = await _running(stores, make_operation)
    await stores.rows.save(other.id, [make_row(other.id, 3)], NO_DELTA)
    rows = [make_row(op.id, n) for n in (12, 3, 7, 1, 9, 4, 2, 100)]
    rows[2] = replace(_pipeline_row(op.id, 7))
    await stores.rows.save(op.id, rows, NO_DELTA)

    found = [row async for row in stores.rows.iterate(op.id, batch_size=batch_size)]

    assert found == sorted(rows, key=lambda r: r.row_number)


async def test_iterate_of_unknown_operation_is_empty(stores: Stores) -> None:
    assert [row async for row in stores.rows.iterate(uuid.uuid4())] == []


async def test_iterate_refuses_a_zero_batch(stores: Stores) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        [row async for row in stores.rows.iterate(uuid.uuid4(), batch_size=0)]


async def test_sqlite_row_timestamps_use_the_column_type_format(
    tmp_path: Path, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    # save() encodes rows itself (the hot path); its text must match UtcDateTime's exactly,
    # or comparisons and ordering between the two would break.
    url = f"sqlite:///{tmp_path}/bulkops.db"
    migrate(url)
    database = Database.from_url(url)
    store = SqlStore(database)
    plus_two = timezone(timedelta(hours=2))
    try:
        for when in (T0, T0.replace(microsecond=0), T0.astimezone(plus_two)):
            op = make_operation(created_at=when)
            await store.add(op)
            await store.save(op.id, [make_row(op.id, 1, completed_at=when)], NO_DELTA)
            async with database.read() as conn:
                created = await conn.exec_driver_sql(
                    "SELECT created_at FROM operations WHERE id = ?", (str(op.id),)
                )
                completed = await conn.exec_driver_sql(
                    "SELECT completed_at FROM row_records WHERE operation_id = ?", (str(op.id),)
                )
                assert created.scalar_one() == completed.scalar_one()
            row = await store.get_row(op.id, 1)
            assert row is not None and row.completed_at == when
            assert row.completed_at.tzinfo is UTC
    finally:
        await database.close()


async def test_sql_save_refuses_naive_timestamps(
    tmp_path: Path, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    url = f"sqlite:///{tmp_path}/bulkops.db"
    migrate(url)
    database = Database.from_url(url)
    store = SqlStore(database)
    try:
        op = make_operation()
        await store.add(op)
        naive = datetime(2024, 1, 1, 12, 0)
        with pytest.raises(ValueError, match="naive"):
            await store.save(op.id, [make_row(op.id, 1, completed_at=naive)], NO_DELTA)
        with pytest.raises(ValueError, match="naive"):
            await store.add(make_operation(created_at=naive))
    finally:
        await database.close()


async def test_iterate_round_trips_every_field_of_rich_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await _running(stores, make_operation)
    rows = [
        _pipeline_row(op.id, 1),
        make_row(op.id, 2, row_id=None),
        make_row(
            op.id,
            3,
            state=RowState.FAILED,
            step_index=-1,
            step_name="validation",
            error_type=ErrorType.VALIDATION,
            error_message="age: bad",
            row_data={"age": "x", "note": None},
        ),
        _pipeline_row(op.id, 4),
    ]
    await stores.rows.save(op.id, rows, ProgressDelta())
    assert [r async for r in stores.rows.iterate(op.id, batch_size=3)] == rows
    waiting = stores.rows.iterate(op.id, states=(RowState.WAITING_FOR_COMPLETION,))
    assert [r async for r in waiting] == [rows[0], rows[3]]


@pytest.mark.parametrize("states", [None, (RowState.FAILED,), (RowState.COMPLETED,)])
async def test_report_batches_hold_the_report_values_of_the_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, states: Any
) -> None:
    op = await _running(stores, make_operation)
    rows = [
        _pipeline_row(op.id, 1),
        make_row(op.id, 2, row_id=None, completed_at=None, state=RowState.PENDING),
        *(make_row(op.id, n) for n in range(3, 9)),
        make_row(op.id, 9, state=RowState.FAILED, error_type=ErrorType.VALIDATION),
        make_row(op.id, 10, completed_at=T0.replace(microsecond=0)),
    ]
    await stores.rows.save(op.id, rows, ProgressDelta())

    batches = [b async for b in stores.rows.report_batches(op.id, batch_size=3, states=states)]

    expected = [report_values(r) async for r in stores.rows.iterate(op.id, states=states)]
    assert [values for batch in batches for values in batch] == expected
    assert expected and all(len(batch) == 3 for batch in batches[:-1])


def test_the_codec_follows_the_table_definitions() -> None:
    check_records_match_tables()
    row = RowRecord(
        operation_id=uuid.uuid4(),
        row_number=7,
        state=RowState.FAILED,
        row_id="id",
        step_index=1,
        step_name="s",
        error_type=ErrorType.TIMEOUT,
        error_message="m",
        retry_attempt=2,
        signal_key="k",
        row_data={"a": 1},
        steps=[StepState("s", 0)],
        waiting_since=datetime(2024, 1, 1, tzinfo=UTC),
        completed_at=datetime(2024, 1, 2, tzinfo=UTC),
    )
    encoded = dict(
        zip(ROW_COLUMNS, row_encoder(row.operation_id, postgres_timestamp)(row), strict=True)
    )
    assert encoded["row_number"] == 7 and encoded["state"] == "Failed"
    assert encoded["retry_attempt"] == 2 and encoded["signal_key"] == "k"
    assert encoded["waiting_since"] == row.waiting_since and encoded["row_data"] == '{"a": 1}'
    decoded = row_decoder(row.operation_id)(tuple(encoded[c] for c in ROW_COLUMNS[1:]))
    assert decoded == row
