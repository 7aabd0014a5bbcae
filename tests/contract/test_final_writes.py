"""Final means final: an operation whose status is final takes no rows, counters or events
until a retry starts a new round; the write that finds it so learns its status."""

from __future__ import annotations

from datetime import timedelta

from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import RowCounts
from bulkops.storage.records import CompletedSpan, Fence, ProgressDelta, RowWrite, WaitOutcome
from bulkops.storage.states import EventType, OperationStatus
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores
from tests.contract.test_chunk_store import FRESH, NOW, chunks_of, split_operation
from tests.contract.test_row_waits import waiting
from tests.contract.test_save_many import counters, failed, running, stored_rows


async def _events(stores: Stores) -> list[EventType]:
    return [event.type for event in await stores.events.read(after=0, limit=1000)]


async def test_a_cancelled_operation_takes_nothing_and_its_write_learns_it(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await running(stores, make_operation, "w1")
    other = await running(stores, make_operation, "w1")
    before = [make_row(op.id, 1)]
    assert await stores.rows.save(op.id, before, ProgressDelta(1, 1, 0), fence=Fence("w1"))
    cancelled = await stores.operations.apply(lifecycle.cancel(op, NOW))
    assert cancelled is not None
    feed = await _events(stores)

    late = failed(make_row, op.id, 2)
    event = lifecycle.row_failed_event(op, late, BASE_TIME)
    span = CompletedSpan(3, 9, None, BASE_TIME)
    statuses = await stores.rows.save_many(
        [
            RowWrite(op.id, [late], ProgressDelta(8, 7, 1), [event], Fence("w1"), [span]),
            RowWrite(other.id, [make_row(other.id, 1)], ProgressDelta(1, 1, 0), (), Fence("w1")),
        ]
    )

    assert statuses == [OperationStatus.CANCELLED, OperationStatus.RUNNING]
    assert await stored_rows(stores, op.id) == before
    assert await counters(stores, op.id) == (1, 1, 0)
    assert await _events(stores) == feed  # no RowFailed after Cancelled
    assert await counters(stores, other.id) == (1, 1, 0)


async def test_a_chunk_of_a_cancelled_operation_takes_nothing(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await split_operation(stores, make_operation, parts=2)
    assert await chunks_of(stores).claim_chunk(["import-users"], "w1", NOW, FRESH)
    current = await stores.operations.get(op.id)
    assert current is not None
    assert await stores.operations.apply(lifecycle.cancel(current, NOW)) is not None

    status = await stores.rows.save(
        op.id, [make_row(op.id, 1)], ProgressDelta(1, 1, 0), fence=Fence("w1", 0)
    )

    assert status is OperationStatus.CANCELLED
    assert await stored_rows(stores, op.id) == []
    assert await counters(stores, op.id) == (0, 0, 0)


async def test_the_total_of_a_final_operation_stays(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await running(stores, make_operation, "w1")
    await stores.operations.set_total_rows(op.id, 5)
    assert await stores.operations.apply(lifecycle.cancel(op, NOW)) is not None

    await stores.operations.set_total_rows(op.id, 500)

    record = await stores.operations.get(op.id)
    assert record is not None and record.total_rows == 5


async def test_a_retry_round_takes_rows_again(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await running(stores, make_operation, "w1")
    first = failed(make_row, op.id, 1)
    assert await stores.rows.save(op.id, [first], ProgressDelta(1, 0, 1), fence=Fence("w1"))
    done = await stores.operations.apply(lifecycle.finish(op, RowCounts(failed=1), NOW))
    assert done is not None and done.status is OperationStatus.COMPLETED_WITH_ERRORS
    late = await stores.rows.save(op.id, [make_row(op.id, 2)], ProgressDelta(1, 1, 0))
    assert late is OperationStatus.COMPLETED_WITH_ERRORS
    assert await stored_rows(stores, op.id) == [first]

    retrying = await stores.operations.apply(lifecycle.begin_retry(done, NOW))
    assert retrying is not None
    held = await stores.operations.apply(lifecycle.claim(retrying, "w2", NOW))
    assert held is not None
    status = await stores.rows.save(
        op.id, [make_row(op.id, 1)], ProgressDelta(0, 1, -1), fence=Fence("w2")
    )

    assert status is OperationStatus.RETRYING
    assert await stored_rows(stores, op.id) == [make_row(op.id, 1)]


async def test_a_waiting_row_of_a_cancelled_operation_waits_on(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    row = waiting(make_row, op.id, 1, "mgr", seconds=0)
    await stores.rows.save(op.id, [row], ProgressDelta())
    assert await stores.operations.apply(lifecycle.cancel(op, NOW)) is not None
    outcome = WaitOutcome(step_index=1, succeeded=True, at=BASE_TIME + timedelta(minutes=1))

    assert await stores.rows.resolve_wait(op.id, 1, row.signal_key, outcome) is None
    found = await stores.rows.resolve_first_waiting(op.id, f"{op.id}:mgr:", lambda _: outcome)
    assert found is None
    assert await stores.rows.get_row(op.id, 1) == row
