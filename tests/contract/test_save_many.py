"""RowStore.save_many: several runs' rows in one transaction, each write fenced on its own."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from bulkops.storage import lifecycle
from bulkops.storage.records import (
    CompletedSpan,
    EventRecord,
    Fence,
    OperationRecord,
    ProgressDelta,
    RowQuery,
    RowRecord,
    RowWrite,
)
from bulkops.storage.sql.bulk import COPY_MIN_ROWS
from bulkops.storage.states import ErrorType, EventType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores
from tests.contract.test_chunk_store import FRESH, NOW, chunks_of, split_operation


def failed(make_row: MakeRow, operation_id: uuid.UUID, number: int) -> RowRecord:
    return make_row(
        operation_id,
        number,
        state=RowState.FAILED,
        error_type=ErrorType.PROCESSING,
        error_message=f"row {number} failed",
        completed_at=None,
    )


async def stored_rows(stores: Stores, operation_id: uuid.UUID) -> list[RowRecord]:
    page = await stores.rows.page(RowQuery(operation_id=operation_id, page_size=10_000))
    return list(page.items)


async def counters(stores: Stores, operation_id: uuid.UUID) -> tuple[int, int, int]:
    record = await stores.operations.get(operation_id)
    assert record is not None
    return record.processed_rows, record.successful_rows, record.error_count


async def row_failures(stores: Stores) -> list[EventRecord]:
    """The RowFailed events of the feed (claims and splits record events too)."""
    feed = await stores.events.read(after=0, limit=100)
    return [event for event in feed if event.type is EventType.ROW_FAILED]


async def running(stores: Stores, make_operation: MakeOperation, worker: str) -> OperationRecord:
    """A Running operation held by ``worker``."""
    op = make_operation()
    await stores.operations.add(op)
    claimed = await stores.operations.apply(lifecycle.claim(op, worker, NOW))
    assert claimed is not None
    return claimed


async def two_pending(
    stores: Stores, make_operation: MakeOperation
) -> tuple[OperationRecord, OperationRecord]:
    """Two stored Pending operations."""
    first, second = make_operation(), make_operation()
    await stores.operations.add(first)
    await stores.operations.add(second)
    return first, second


async def two_claimed_chunks(stores: Stores, make_operation: MakeOperation) -> OperationRecord:
    """An operation split in two chunks, chunk 0 held by w1 and chunk 1 by w2."""
    op = await split_operation(stores, make_operation, parts=2)
    for worker in ("w1", "w2"):
        assert await chunks_of(stores).claim_chunk(["import-users"], worker, NOW, FRESH)
    return op


async def test_no_writes_return_no_statuses(stores: Stores) -> None:
    assert await stores.rows.save_many([]) == []


async def test_writes_of_several_operations_are_stored_with_a_status_each_in_order(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    ops = [await running(stores, make_operation, "w1") for _ in range(3)]
    pending = make_operation()
    await stores.operations.add(pending)
    # Against the order of their ids, so a store that sorts must answer in the given order.
    targets = sorted([*ops, pending], key=lambda op: op.id, reverse=True)
    writes = [
        RowWrite(
            op.id,
            [make_row(op.id, n) for n in range(1, 4 + i)],
            ProgressDelta(3 + i, 3 + i, 0),
            fence=None if op is pending else Fence("w1"),
        )
        for i, op in enumerate(targets)
    ]

    statuses = await stores.rows.save_many(writes)

    assert statuses == [
        OperationStatus.PENDING if op is pending else OperationStatus.RUNNING for op in targets
    ]
    for i, write in enumerate(writes):
        assert await stored_rows(stores, write.operation_id) == list(write.rows)
        assert await counters(stores, write.operation_id) == (3 + i, 3 + i, 0)


async def test_two_chunks_of_one_operation_are_both_written(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await two_claimed_chunks(stores, make_operation)
    first = [make_row(op.id, n) for n in range(1, 11)]
    second = [make_row(op.id, 11), failed(make_row, op.id, 12)]

    statuses = await stores.rows.save_many(
        [
            RowWrite(op.id, second, ProgressDelta(2, 1, 1), fence=Fence("w2", 1)),
            RowWrite(op.id, first, ProgressDelta(10, 10, 0), fence=Fence("w1", 0)),
        ]
    )

    assert statuses == [OperationStatus.RUNNING, OperationStatus.RUNNING]
    assert await stored_rows(stores, op.id) == [*first, *second]
    assert await counters(stores, op.id) == (12, 11, 1)


async def test_a_write_whose_chunk_is_lost_writes_nothing_and_the_others_are_written(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await split_operation(stores, make_operation, parts=3)
    for worker in ("w1", "w2", "w3"):  # chunks 0, 1 and 2
        assert await chunks_of(stores).claim_chunk(["import-users"], worker, NOW, FRESH)
    rows = {c: [failed(make_row, op.id, 1 + 10 * c), make_row(op.id, 2 + 10 * c)] for c in range(3)}
    events = {c: [lifecycle.row_failed_event(op, rows[c][0], BASE_TIME)] for c in range(3)}

    statuses = await stores.rows.save_many(
        [
            RowWrite(op.id, rows[c], ProgressDelta(2, 1, 1), events[c], Fence(worker, c))
            for c, worker in enumerate(("w1", "former", "w3"))
        ]
    )

    assert statuses == [OperationStatus.RUNNING, None, OperationStatus.RUNNING]
    assert await stored_rows(stores, op.id) == [*rows[0], *rows[2]]
    assert await counters(stores, op.id) == (4, 2, 2)
    stored = await row_failures(stores)
    assert [event.message for event in stored] == [
        event.message for event in (*events[0], *events[2])
    ]


async def test_a_lost_operation_and_an_unknown_one_write_nothing_among_held_ones(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    held = await running(stores, make_operation, "w1")
    lost = await running(stores, make_operation, "holder")
    unknown = uuid.uuid4()

    def one_failure(operation: OperationRecord) -> RowWrite:
        row = failed(make_row, operation.id, 1)
        event = lifecycle.row_failed_event(operation, row, BASE_TIME)
        return RowWrite(operation.id, [row], ProgressDelta(1, 0, 1), [event], Fence("w1"))

    lost_write, held_write = one_failure(lost), one_failure(held)
    unknown_write = RowWrite(unknown, [make_row(unknown, 1)], ProgressDelta(1, 1, 0))

    statuses = await stores.rows.save_many([lost_write, unknown_write, held_write])

    assert statuses == [None, None, OperationStatus.RUNNING]
    assert await stored_rows(stores, lost.id) == []
    assert await counters(stores, lost.id) == (0, 0, 0)
    assert await stores.rows.get_row(unknown, 1) is None
    assert await stored_rows(stores, held.id) == list(held_write.rows)
    assert await counters(stores, held.id) == (1, 0, 1)
    (event,) = await row_failures(stores)
    assert event.operation_id == held.id


async def test_a_row_of_another_operation_is_refused_before_anything_is_written(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op, other = await two_pending(stores, make_operation)

    with pytest.raises(ValueError):
        await stores.rows.save_many(
            [
                RowWrite(op.id, [make_row(op.id, 1)], ProgressDelta(1, 1, 0)),
                RowWrite(op.id, [make_row(other.id, 2)], ProgressDelta(1, 1, 0)),
            ]
        )

    assert await stored_rows(stores, op.id) == []
    assert await counters(stores, op.id) == (0, 0, 0)


async def test_large_batches_of_two_operations_land_with_their_own_operation(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    first, second = await two_pending(stores, make_operation)
    size = 2 * COPY_MIN_ROWS  # rows with ids are no plain spans: PostgreSQL copies them
    numbers = range(1, size + 1)
    early = [failed(make_row, first.id, n) for n in numbers]
    other = [make_row(second.id, n, row_id=f"second-{n}", row_data={"n": n}) for n in numbers]
    late = [make_row(first.id, n, row_id=f"late-{n}") for n in numbers]  # replaces ``early``
    more = [make_row(second.id, n, row_id=f"more-{n}") for n in range(size + 1, 2 * size + 1)]

    statuses = await stores.rows.save_many(
        [
            RowWrite(first.id, early, ProgressDelta(size, 0, size)),
            RowWrite(second.id, other, ProgressDelta(size, size, 0)),
            RowWrite(first.id, late, ProgressDelta(0, size, -size)),
            RowWrite(second.id, more, ProgressDelta(size, size, 0)),
        ]
    )

    assert statuses == [OperationStatus.PENDING] * 4
    assert await stored_rows(stores, first.id) == late
    assert await stored_rows(stores, second.id) == [*other, *more]
    assert await counters(stores, first.id) == (size, size, 0)
    assert await counters(stores, second.id) == (2 * size, 2 * size, 0)


async def test_completed_spans_of_several_writes_are_stored(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await two_claimed_chunks(stores, make_operation)
    stamp = BASE_TIME + timedelta(seconds=1)
    plain = [make_row(op.id, n, row_id=None, completed_at=stamp) for n in range(1, 21)]
    span = CompletedSpan(1, 10, "process", stamp)

    statuses = await stores.rows.save_many(
        [
            RowWrite(op.id, [], ProgressDelta(10, 10, 0), fence=Fence("w1", 0), completed=[span]),
            RowWrite(op.id, plain[10:], ProgressDelta(10, 10, 0), fence=Fence("w2", 1)),
        ]
    )

    assert statuses == [OperationStatus.RUNNING, OperationStatus.RUNNING]
    assert await stored_rows(stores, op.id) == plain
    assert await counters(stores, op.id) == (20, 20, 0)


async def test_spans_over_stored_rows_beside_a_lost_write_replace_them_and_nothing_else(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await two_claimed_chunks(stores, make_operation)
    stamp = BASE_TIME + timedelta(seconds=1)
    earlier = failed(make_row, op.id, 3)  # a resumed run's row, stored before
    assert await stores.rows.save_many(
        [RowWrite(op.id, [earlier], ProgressDelta(1, 0, 1), fence=Fence("w1", 0))]
    ) == [OperationStatus.RUNNING]
    plain = [make_row(op.id, n, row_id=None, completed_at=stamp) for n in range(1, 11)]
    span = CompletedSpan(1, 10, "process", stamp)

    statuses = await stores.rows.save_many(
        [
            RowWrite(op.id, [], ProgressDelta(9, 10, -1), fence=Fence("w1", 0), completed=[span]),
            RowWrite(op.id, [make_row(op.id, 11)], ProgressDelta(1, 1, 0), fence=Fence("gone", 1)),
        ]
    )

    assert statuses == [OperationStatus.RUNNING, None]
    assert await stored_rows(stores, op.id) == plain
    assert await counters(stores, op.id) == (10, 10, 0)


async def test_writes_naming_operations_in_opposite_orders_never_deadlock(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """Writers lock operation rows in one order whatever order their writes come in: two
    processes' writes of the same operations queue, never deadlock. A third transaction
    holds the later operation's row while one write waits for it and the other write (its
    operations in the opposite order) comes in; then lets go."""
    if stores.database is None or stores.kind != "postgres":
        pytest.skip("row locks taken one by one: a PostgreSQL matter")
    database = stores.database
    low, high = sorted(await two_pending(stores, make_operation), key=lambda op: op.id)

    def write(operation: OperationRecord, number: int) -> RowWrite:
        return RowWrite(operation.id, [make_row(operation.id, number)], ProgressDelta(1, 1, 0))

    async def waiting_for_locks() -> int:
        async with database.read() as conn:
            found = await conn.execute(text(_LOCK_WAITS))
            return int(found.scalar_one())

    async def until_waiting(count: int) -> None:
        deadline = asyncio.get_running_loop().time() + 10
        while await waiting_for_locks() < count:
            assert asyncio.get_running_loop().time() < deadline, "no write waits for a lock"
            await asyncio.sleep(0.01)

    async with database.write() as holder:
        await holder.execute(text(_LOCK_OPERATION), {"id": high.id})
        backward = asyncio.create_task(stores.rows.save_many([write(high, 1), write(low, 1)]))
        await until_waiting(1)
        forward = asyncio.create_task(stores.rows.save_many([write(low, 2), write(high, 2)]))
        await until_waiting(2)
    answers = await asyncio.wait_for(asyncio.gather(backward, forward), 30)

    assert answers == [[OperationStatus.PENDING] * 2] * 2
    for operation in (low, high):
        assert len(await stored_rows(stores, operation.id)) == 2
        assert await counters(stores, operation.id) == (2, 2, 0)


_LOCK_OPERATION = "SELECT 1 FROM operations WHERE id = :id FOR UPDATE"
_LOCK_WAITS = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
)
