"""RowStore waits: finding the waiting row for a signal (FIFO) and ending a wait once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta

from bulkops.storage.records import ProgressDelta, RowRecord, StepState, WaitOutcome
from bulkops.storage.states import ErrorType, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores


def waiting(
    make_row: MakeRow, operation_id: uuid.UUID, number: int, user_key: str, seconds: int
) -> RowRecord:
    return make_row(
        operation_id,
        number,
        state=RowState.WAITING_FOR_COMPLETION,
        step_index=1,
        step_name="approve",
        signal_key=f"{operation_id}:{user_key}:{number}",
        waiting_since=BASE_TIME + timedelta(seconds=seconds),
        completed_at=None,
        steps=[
            StepState("create", 0, RowState.COMPLETED, attempts=1, completed_at=BASE_TIME),
            StepState(
                "approve",
                1,
                RowState.WAITING_FOR_COMPLETION,
                attempts=1,
                started_at=BASE_TIME,
                signal_key=f"{operation_id}:{user_key}:{number}",
            ),
            StepState("welcome", 2),
        ],
    )


async def test_find_waiting_is_fifo_by_waiting_time_then_row_number(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    rows = [
        waiting(make_row, op.id, 1, "mgr", seconds=5),
        waiting(make_row, op.id, 2, "mgr", seconds=1),
        waiting(make_row, op.id, 3, "mgr", seconds=1),
        waiting(make_row, op.id, 4, "other", seconds=0),
        waiting(make_row, op.id, 5, "mgr:x", seconds=0),  # "mgr" is only a prefix of its key
    ]
    await stores.rows.save(op.id, rows, ProgressDelta())
    first = await stores.rows.find_waiting(op.id, f"{op.id}:mgr:")
    assert first is not None and first.row_number == 2
    assert first == rows[1]
    other = await stores.rows.find_waiting(op.id, f"{op.id}:other:")
    assert other is not None and other.row_number == 4
    assert await stores.rows.find_waiting(op.id, f"{op.id}:nobody:") is None
    assert await stores.rows.find_waiting(uuid.uuid4(), f"{op.id}:mgr:") is None
    # Case matters, and LIKE wildcards in keys are literal.
    assert await stores.rows.find_waiting(op.id, f"{op.id}:MGR:") is None
    assert await stores.rows.find_waiting(op.id, f"{op.id}:m_r:") is None
    assert await stores.rows.find_waiting(op.id, f"{op.id}:%:") is None


async def test_resolve_wait_succeeds_once_and_moves_the_row_on(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    row = waiting(make_row, op.id, 1, "mgr", seconds=0)
    await stores.rows.save(op.id, [row], ProgressDelta())
    at = BASE_TIME + timedelta(minutes=1)
    outcome = WaitOutcome(step_index=1, succeeded=True, at=at)
    resolved = await stores.rows.resolve_wait(op.id, 1, row.signal_key, outcome)
    assert resolved is not None and resolved.state is RowState.RUNNING
    assert resolved.steps[1].state is RowState.COMPLETED and resolved.steps[1].completed_at == at
    assert await stores.rows.get_row(op.id, 1) == resolved
    # The row no longer waits: a second signal finds nothing and changes nothing.
    assert await stores.rows.resolve_wait(op.id, 1, row.signal_key, outcome) is None
    assert await stores.rows.find_waiting(op.id, f"{op.id}:mgr:") is None


async def test_resolve_wait_failure_fails_the_row(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    row = waiting(make_row, op.id, 7, "mgr", seconds=0)
    await stores.rows.save(op.id, [row], ProgressDelta())
    outcome = WaitOutcome(
        step_index=1,
        succeeded=False,
        at=BASE_TIME,
        error_type=ErrorType.SIGNAL_FAILURE,
        error_message="rejected by manager",
    )
    assert await stores.rows.resolve_wait(op.id, 7, "wrong-key", outcome) is None
    resolved = await stores.rows.resolve_wait(op.id, 7, row.signal_key, outcome)
    assert resolved is not None
    stored = await stores.rows.get_row(op.id, 7)
    assert stored == resolved
    assert (stored.state, stored.error_type, stored.step_index) == (
        RowState.FAILED,
        ErrorType.SIGNAL_FAILURE,
        1,
    )
    assert stored.error_message == "rejected by manager"
    assert stored.steps[1].state is RowState.FAILED
    assert stored.steps[2].state is RowState.PENDING


async def test_polling_waits_have_no_key(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    row = make_row(op.id, 1, state=RowState.WAITING_FOR_COMPLETION, steps=[StepState("p", 0)])
    await stores.rows.save(op.id, [row], ProgressDelta())
    outcome = WaitOutcome(0, False, BASE_TIME, ErrorType.TIMEOUT, "timed out")
    resolved = await stores.rows.resolve_wait(op.id, 1, None, outcome)
    assert resolved is not None and resolved.state is RowState.FAILED


async def test_concurrent_resolutions_have_one_winner(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    row = waiting(make_row, op.id, 1, "mgr", seconds=0)
    await stores.rows.save(op.id, [row], ProgressDelta())
    outcomes = [
        WaitOutcome(1, True, BASE_TIME),
        WaitOutcome(1, False, BASE_TIME, ErrorType.TIMEOUT, "late"),
        WaitOutcome(1, False, BASE_TIME, ErrorType.SIGNAL_FAILURE, "no"),
    ]
    results = await asyncio.gather(
        *(stores.rows.resolve_wait(op.id, 1, row.signal_key, o) for o in outcomes)
    )
    assert sum(r is not None for r in results) == 1


def ends_its_step(succeeded: bool = True) -> Callable[[RowRecord], WaitOutcome]:
    def outcome(row: RowRecord) -> WaitOutcome:
        return WaitOutcome(
            step_index=row.step_index,
            succeeded=succeeded,
            at=BASE_TIME + timedelta(minutes=1),
            error_type=None if succeeded else ErrorType.SIGNAL_FAILURE,
            error_message=None if succeeded else "refused",
        )

    return outcome


async def test_resolve_first_waiting_ends_the_oldest_wait_under_the_key(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    rows = [
        waiting(make_row, op.id, 1, "mgr", seconds=5),
        waiting(make_row, op.id, 2, "mgr", seconds=1),
        waiting(make_row, op.id, 3, "mgr:x", seconds=0),  # "mgr" is only a prefix of its key
    ]
    await stores.rows.save(op.id, rows, ProgressDelta())

    first = await stores.rows.resolve_first_waiting(op.id, f"{op.id}:mgr:", ends_its_step())
    failed = await stores.rows.resolve_first_waiting(op.id, f"{op.id}:mgr:", ends_its_step(False))

    assert first is not None and (first.row_number, first.state) == (2, RowState.RUNNING)
    assert first.steps[1].state is RowState.COMPLETED
    assert await stores.rows.get_row(op.id, 2) == first
    assert failed is not None and (failed.row_number, failed.state) == (1, RowState.FAILED)
    assert (failed.error_type, failed.error_message) == (ErrorType.SIGNAL_FAILURE, "refused")
    assert await stores.rows.resolve_first_waiting(op.id, f"{op.id}:mgr:", ends_its_step()) is None
    assert await stores.rows.resolve_first_waiting(op.id, f"{op.id}:m_r:", ends_its_step()) is None
    third = await stores.rows.get_row(op.id, 3)
    assert third is not None and third.state is RowState.WAITING_FOR_COMPLETION


async def test_concurrent_first_waiting_resolutions_end_distinct_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    await stores.rows.save(
        op.id, [waiting(make_row, op.id, n, "mgr", seconds=n) for n in range(1, 6)], ProgressDelta()
    )

    results = await asyncio.gather(
        *(
            stores.rows.resolve_first_waiting(op.id, f"{op.id}:mgr:", ends_its_step())
            for _ in range(7)
        )
    )

    ended = sorted(result.row_number for result in results if result is not None)
    assert ended == [1, 2, 3, 4, 5]
    assert results.count(None) == 2
