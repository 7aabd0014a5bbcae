"""RetryStore: a retry round is atomic, snapshots errors, and resets only what qualifies."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from bulkops.storage import lifecycle
from bulkops.storage.records import ProgressDelta, RetryRequest, RowRecord, StepState
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores


async def finished_operation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> tuple[uuid.UUID, int]:
    """An operation that ended CompletedWithErrors with a mix of rows."""
    op = make_operation()
    await stores.operations.add(op)
    claimed = await stores.operations.apply(lifecycle.claim(op, "w", BASE_TIME))
    assert claimed is not None

    def failed(number: int, step: int, error: ErrorType, attempt: int = 0) -> RowRecord:
        return make_row(
            op.id,
            number,
            state=RowState.FAILED,
            step_index=step,
            step_name="validation" if step < 0 else f"step-{step}",
            error_type=error,
            error_message=f"row {number} broke",
            retry_attempt=attempt,
        )

    timed_out = failed(4, 1, ErrorType.TIMEOUT, attempt=1)
    timed_out.steps = [
        StepState("step-0", 0, RowState.COMPLETED, 1, BASE_TIME, BASE_TIME),
        StepState(
            "step-1", 1, RowState.FAILED, 1, BASE_TIME, BASE_TIME, ErrorType.TIMEOUT, "late", "k"
        ),
        StepState("step-2", 2),
    ]
    timed_out.waiting_since, timed_out.signal_key = BASE_TIME, "k"
    rows = [
        make_row(op.id, 1),
        failed(2, -1, ErrorType.VALIDATION),
        failed(3, 0, ErrorType.STEP_FAILURE),
        timed_out,
        failed(5, 2, ErrorType.STEP_FAILURE),
    ]
    await stores.rows.save(op.id, rows, ProgressDelta(5, 1, 4))
    done = await stores.operations.apply(
        lifecycle.finish(claimed, lifecycle.RowCounts(1, 4), BASE_TIME)
    )
    assert done is not None and done.status is OperationStatus.COMPLETED_WITH_ERRORS
    return op.id, done.version


async def test_begin_retry_resets_qualifying_rows_and_snapshots_them(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await finished_operation(stores, make_operation, make_row)
    now = BASE_TIME + timedelta(hours=1)
    # Step 2 does not allow operation retry: only steps 0 and 1 qualify.
    started = await stores.retries.begin_retry(
        RetryRequest(operation_id, version, allowed_steps=(0, 1)), now
    )
    assert started is not None and started.rows_reset == 2
    record = started.record
    assert (record.status, record.retry_count, record.version) == (
        OperationStatus.RETRYING,
        1,
        version + 1,
    )
    assert record.completed_at is None
    states = {n: await stores.rows.get_row(operation_id, n) for n in range(1, 6)}
    assert states[3] is not None and states[4] is not None
    assert (states[3].state, states[3].retry_attempt, states[3].step_index) == (
        RowState.PENDING,
        1,
        0,
    )
    assert (states[4].state, states[4].retry_attempt) == (RowState.PENDING, 2)
    assert states[3].error_type is None and states[3].error_message is None
    # The timed-out step starts afresh (its clock too); the completed step stays completed.
    assert [s.state for s in states[4].steps] == [RowState.COMPLETED, RowState.PENDING] * 1 + [
        RowState.PENDING
    ]
    assert states[4].steps[1].started_at is None and states[4].steps[1].error_type is None
    assert (states[4].waiting_since, states[4].signal_key) == (None, None)
    events = await stores.events.read(after=0, limit=10, operation_id=operation_id)
    assert [e.message for e in events][-1] == (
        "Status changed from CompletedWithErrors to Retrying"
    )
    assert states[2] is not None and states[2].state is RowState.FAILED  # validation
    assert states[5] is not None and states[5].state is RowState.FAILED  # step disallows

    history = await stores.retries.history(operation_id, row_number=None, page=1, page_size=10)
    assert history.total_count == 2
    assert [(h.row_number, h.attempt, h.step_index, h.error_type) for h in history.items] == [
        (3, 0, 0, ErrorType.STEP_FAILURE),
        (4, 1, 1, ErrorType.TIMEOUT),
    ]
    assert history.items[0].error_message == "row 3 broke"
    assert history.items[0].step_name == "step-0"
    one = await stores.retries.history(operation_id, row_number=4, page=1, page_size=10)
    assert [h.row_number for h in one.items] == [4]

    pending = [
        r.row_number async for r in stores.rows.iterate(operation_id, states=(RowState.PENDING,))
    ]
    assert pending == [3, 4]


async def test_begin_retry_of_selected_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await finished_operation(stores, make_operation, make_row)
    started = await stores.retries.begin_retry(
        RetryRequest(operation_id, version, allowed_steps=(0, 1, 2), row_numbers=(1, 2, 5, 99)),
        BASE_TIME,
    )
    assert started is not None and started.rows_reset == 1  # only row 5 qualifies
    row = await stores.rows.get_row(operation_id, 5)
    assert row is not None and row.state is RowState.PENDING


async def test_nothing_qualifying_changes_nothing(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await finished_operation(stores, make_operation, make_row)
    started = await stores.retries.begin_retry(
        RetryRequest(operation_id, version, allowed_steps=(0,), row_numbers=(4,)), BASE_TIME
    )
    assert started is not None and started.rows_reset == 0
    assert started.record.status is OperationStatus.COMPLETED_WITH_ERRORS
    assert started.record.retry_count == 0 and started.record.version == version
    history = await stores.retries.history(operation_id, row_number=None, page=1, page_size=10)
    assert history.total_count == 0


async def test_stale_token_or_wrong_status_is_refused(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await finished_operation(stores, make_operation, make_row)
    stale = await stores.retries.begin_retry(
        RetryRequest(operation_id, version - 1, allowed_steps=(0, 1)), BASE_TIME
    )
    assert stale is None
    unknown = await stores.retries.begin_retry(
        RetryRequest(uuid.uuid4(), 0, allowed_steps=(0,)), BASE_TIME
    )
    assert unknown is None
    # Two concurrent retries with the same token: exactly one wins.
    results = await asyncio.gather(
        *(
            stores.retries.begin_retry(
                RetryRequest(operation_id, version, allowed_steps=(0, 1)), BASE_TIME
            )
            for _ in range(3)
        )
    )
    winners = [r for r in results if r is not None]
    assert len(winners) == 1 and winners[0].rows_reset == 2
    record = await stores.operations.get(operation_id)
    assert record is not None and record.retry_count == 1
    history = await stores.retries.history(operation_id, row_number=None, page=1, page_size=10)
    assert history.total_count == 2


async def test_iterate_by_state_pages_through_matching_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    rows = [
        make_row(op.id, n, state=RowState.PENDING if n % 3 == 0 else RowState.COMPLETED)
        for n in range(1, 31)
    ]
    await stores.rows.save(op.id, rows, ProgressDelta())
    found = [
        r.row_number
        async for r in stores.rows.iterate(op.id, batch_size=4, states=(RowState.PENDING,))
    ]
    assert found == list(range(3, 31, 3))
    both = stores.rows.iterate(op.id, batch_size=7, states=(RowState.PENDING, RowState.COMPLETED))
    assert [r.row_number async for r in both] == list(range(1, 31))
