"""Behaviour of the in-memory stores that the shared contract suite does not cover."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from bulkops.storage.memory import MemoryEventStore, MemoryStore
from bulkops.storage.records import (
    EventRecord,
    OperationRecord,
    ProgressDelta,
    RowRecord,
    StepState,
)
from bulkops.storage.states import EventType, OperationStatus, RowState, Severity

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def _event(minute: int) -> EventRecord:
    return EventRecord(
        operation_id=uuid.uuid4(),
        operation_name="import-users",
        type=EventType.CREATED,
        severity=Severity.INFO,
        message=f"event {minute}",
        timestamp=T0 + timedelta(minutes=minute),
    )


def _operation() -> OperationRecord:
    return OperationRecord(
        id=uuid.uuid4(),
        operation_name="import-users",
        status=OperationStatus.RUNNING,
        created_by="alice",
        created_at=T0,
        source="api",
        file_id="f1",
        file_name="users.csv",
        file_size=10,
        file_format="csv",
        metadata={},
    )


async def test_sequences_start_at_one() -> None:
    events = MemoryEventStore()
    await events.append([_event(0), _event(1)])

    assert [e.sequence for e in await events.read(after=None, limit=10)] == [1, 2]


async def test_the_tail_is_bounded_and_sequences_keep_increasing() -> None:
    events = MemoryEventStore(max_events=3)
    await events.append([_event(i) for i in range(5)])

    kept = await events.read(after=None, limit=10)
    assert [e.sequence for e in kept] == [3, 4, 5]
    # A reader that fell behind the tail gets what is left, in order.
    assert [e.sequence for e in await events.read(after=1, limit=10)] == [3, 4, 5]

    await events.append([_event(5)])
    assert [e.sequence for e in await events.read(after=None, limit=10)] == [4, 5, 6]


async def test_sequences_keep_increasing_after_everything_is_pruned() -> None:
    events = MemoryEventStore()
    await events.append([_event(0), _event(1)])

    assert await events.prune(T0 + timedelta(days=1)) == 2
    await events.append([_event(2)])

    assert [e.sequence for e in await events.read(after=None, limit=10)] == [3]


async def test_prune_keeps_the_bound() -> None:
    events = MemoryEventStore(max_events=2)
    await events.append([_event(0), _event(1)])
    await events.prune(T0 + timedelta(seconds=30))
    await events.append([_event(2), _event(3)])

    assert [e.message for e in await events.read(after=None, limit=10)] == ["event 2", "event 3"]


def test_max_events_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_events"):
        MemoryEventStore(max_events=0)


async def test_iterate_sees_rows_saved_while_iterating() -> None:
    store = MemoryStore()
    op = _operation()
    await store.add(op)
    rows = [RowRecord(operation_id=op.id, row_number=n, state=RowState.PENDING) for n in (1, 2)]
    await store.save(op.id, rows, ProgressDelta())

    seen = []
    async for row in store.iterate(op.id, batch_size=1):
        seen.append(row.row_number)
        if row.row_number == 1:
            late = [
                RowRecord(operation_id=op.id, row_number=n, state=RowState.PENDING) for n in (3, 0)
            ]
            await store.save(op.id, late, ProgressDelta())

    # Keyset iteration continues after the last row number it yielded.
    assert seen == [1, 2, 3]


async def test_mutating_a_step_after_save_does_not_change_the_stored_row() -> None:
    store = MemoryStore()
    op = _operation()
    await store.add(op)
    step = StepState(name="charge", index=0)
    row = RowRecord(operation_id=op.id, row_number=1, state=RowState.RUNNING, steps=[step])
    await store.save(op.id, [row], ProgressDelta())

    step.state = RowState.FAILED
    row.state = RowState.COMPLETED

    stored = await store.get_row(op.id, 1)
    assert stored is not None
    assert stored.state is RowState.RUNNING and stored.steps[0].state is RowState.PENDING
