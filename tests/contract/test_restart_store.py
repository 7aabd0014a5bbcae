"""Restarts, attribution and first data, on every adapter: a restart round resets Failed
and (with ``include_completed``) Completed rows from a step and takes the reset rows out
of the counters; events keep their actor and the feed filters by it; a fix keeps the
row's first data and records its event in the same transaction."""

from __future__ import annotations

import uuid
from datetime import timedelta

from bulkops.storage import lifecycle
from bulkops.storage.records import ProgressDelta, RetryRequest, RowRecord, StepState
from bulkops.storage.states import ErrorType, EventType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores

NOW = BASE_TIME + timedelta(minutes=5)


def _steps(*states: RowState) -> list[StepState]:
    return [
        StepState(f"s{i}", i, state, 1 if state is not RowState.PENDING else 0)
        for i, state in enumerate(states)
    ]


async def _pipeline_operation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, *, failed: bool = True
) -> tuple[uuid.UUID, int]:
    """Rows 1-2 completed all three steps; row 3 failed at step 1 (when ``failed``)."""
    op = make_operation()
    await stores.operations.add(op, [lifecycle.created_event(op, BASE_TIME)])
    claimed = await stores.operations.apply(lifecycle.claim(op, "w", BASE_TIME))
    assert claimed is not None
    done = RowState.COMPLETED
    rows: list[RowRecord] = [
        make_row(
            op.id,
            n,
            step_index=2,
            step_name="s2",
            steps=_steps(done, done, done),
            row_data={"n": str(n)},
        )
        for n in (1, 2)
    ]
    if failed:
        rows.append(
            make_row(
                op.id,
                3,
                state=RowState.FAILED,
                step_index=1,
                step_name="s1",
                error_type=ErrorType.STEP_FAILURE,
                error_message="broke",
                steps=_steps(done, RowState.FAILED, RowState.PENDING),
                row_data={"n": "3"},
            )
        )
    await stores.rows.save(op.id, rows, ProgressDelta(len(rows), 2, len(rows) - 2))
    await stores.operations.set_total_rows(op.id, len(rows))
    counts = lifecycle.RowCounts(2, len(rows) - 2)
    finished = await stores.operations.apply(lifecycle.finish(claimed, counts, BASE_TIME))
    assert finished is not None
    return op.id, finished.version


async def test_a_restart_resets_from_its_step_and_leaves_the_counters_within_the_totals(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await _pipeline_operation(stores, make_operation, make_row)
    request = RetryRequest(
        operation_id, version, (0, 1, 2), from_step=2, include_completed=True, actor="bob"
    )
    started = await stores.retries.begin_retry(request, NOW)
    assert started is not None and started.rows_reset == 3
    record = started.record
    assert record.status is OperationStatus.RETRYING and record.retry_count == 1
    # Every reset row left the counters: the round counts them again from nothing.
    assert (record.processed_rows, record.successful_rows, record.error_count) == (0, 0, 0)
    one = await stores.rows.get_row(operation_id, 1)
    assert one is not None and one.state is RowState.PENDING and one.retry_attempt == 1
    assert [(s.state, s.restart) for s in one.steps] == [
        (RowState.COMPLETED, 0),
        (RowState.COMPLETED, 0),
        (RowState.PENDING, 1),
    ]
    three = await stores.rows.get_row(operation_id, 3)
    assert three is not None
    # Its failed step 1 (before the restart's step) runs again, under its old key.
    assert [(s.state, s.restart) for s in three.steps] == [
        (RowState.COMPLETED, 0),
        (RowState.PENDING, 0),
        (RowState.PENDING, 1),
    ]
    history = await stores.retries.history(operation_id, row_number=None, page=1, page_size=10)
    # Every row the round reset, as it stood: the completed ones without an error.
    assert [(e.row_number, e.error_type) for e in history.items] == [
        (1, None),
        (2, None),
        (3, ErrorType.STEP_FAILURE),
    ]
    events = await stores.events.read(after=None, limit=10, operation_id=operation_id)
    assert events[-1].type is EventType.STATUS_CHANGED and events[-1].actor == "bob"


async def test_a_restart_of_a_completed_operation_needs_include_completed(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await _pipeline_operation(
        stores, make_operation, make_row, failed=False
    )
    plain = RetryRequest(operation_id, version, (0, 1, 2), from_step=1)
    assert await stores.retries.begin_retry(plain, NOW) is None
    chosen = RetryRequest(
        operation_id, version, (0, 1, 2), row_numbers=(2,), from_step=1, include_completed=True
    )
    started = await stores.retries.begin_retry(chosen, NOW)
    assert started is not None and started.rows_reset == 1
    assert (started.record.processed_rows, started.record.successful_rows) == (1, 1)
    two = await stores.rows.get_row(operation_id, 2)
    assert two is not None and [s.restart for s in two.steps] == [0, 1, 1]


async def test_events_keep_their_actor_and_the_feed_filters_by_it(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = make_operation(created_by="carol")
    await stores.operations.add(op, [lifecycle.created_event(op, BASE_TIME)])
    cancel = lifecycle.attributed(lifecycle.cancel(op, BASE_TIME), "dave")
    assert await stores.operations.apply(cancel) is not None
    everything = await stores.events.read(after=None, limit=10)
    assert [(e.type, e.actor) for e in everything] == [
        (EventType.CREATED, "carol"),
        (EventType.CANCELLED, "dave"),
    ]
    found = await stores.events.read(after=0, limit=10, actor="dave")
    assert [e.type for e in found] == [EventType.CANCELLED]
    assert await stores.events.read(after=None, limit=10, actor="nobody") == []
    scoped = await stores.events.read(after=None, limit=10, operation_id=op.id, actor="carol")
    assert [e.type for e in scoped] == [EventType.CREATED]


async def test_a_fix_keeps_the_first_data_and_records_its_event(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, _ = await _pipeline_operation(stores, make_operation, make_row)
    record = await stores.operations.get(operation_id)
    assert record is not None
    assert await stores.rows.originals(operation_id, [3]) == {}
    event = lifecycle.row_fixed_event(record, 3, ["n"], NOW, "erin")
    assert await stores.rows.fix_row(operation_id, 3, {"n": "33"}, NOW, [event])
    assert await stores.rows.fix_row(operation_id, 3, {"n": "333"}, NOW)
    assert await stores.rows.originals(operation_id, [1, 3, 9]) == {3: {"n": "3"}}
    fixed = await stores.events.read(after=0, limit=10, actor="erin")
    assert [(e.type, e.message) for e in fixed] == [(EventType.ROW_FIXED, "Row 3 fixed: n changed")]
    # A refused fix records nothing.
    assert await stores.rows.fix_row(operation_id, 1, {"n": "x"}, NOW, [event]) is None
    assert len(await stores.events.read(after=0, limit=10, actor="erin")) == 1
    assert await stores.rows.originals(operation_id, [1]) == {}
