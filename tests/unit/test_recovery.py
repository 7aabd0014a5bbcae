"""Orphaned-step recovery on memory stores, and its behaviour when storage is down."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import pytest

from bulkops.clock import utcnow
from bulkops.engine.recovery import CRASHED_MESSAGE, ROW_MESSAGE, OrphanRecovery
from bulkops.errors import StorageError
from bulkops.storage import lifecycle
from bulkops.storage.memory import MemoryEventStore, MemoryStore
from bulkops.storage.records import OperationRecord, ProgressDelta, RowRecord, StepState
from bulkops.storage.states import ErrorType, EventType, OperationStatus, RowState


def record(**overrides: object) -> OperationRecord:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "operation_name": "op",
        "status": OperationStatus.PENDING,
        "created_by": "t",
        "created_at": utcnow() - timedelta(hours=2),
        "source": "default",
        "file_id": "f",
        "file_name": "f.csv",
        "file_size": 1,
        "file_format": "csv",
        "metadata": {},
    }
    values.update(overrides)
    return OperationRecord(**values)  # type: ignore[arg-type]


async def running(store: MemoryStore, heartbeat_age: timedelta) -> OperationRecord:
    op = record()
    await store.add(op)
    claimed = await store.apply(lifecycle.claim(op, "w", utcnow() - heartbeat_age))
    assert claimed is not None
    return claimed


def waiting_row(operation_id: uuid.UUID, number: int, age: timedelta) -> RowRecord:
    key = f"{operation_id}:k:{number}"
    return RowRecord(
        operation_id=operation_id,
        row_number=number,
        state=RowState.WAITING_FOR_COMPLETION,
        step_index=0,
        step_name="wait",
        signal_key=key,
        waiting_since=utcnow() - age,
        steps=[StepState("wait", 0, RowState.WAITING_FOR_COMPLETION, signal_key=key)],
    )


async def test_operations_of_dead_workers_fail_and_live_ones_are_left_alone() -> None:
    events = MemoryEventStore()
    store = MemoryStore(events)
    dead = await running(store, timedelta(minutes=10))
    await store.save(dead.id, [waiting_row(dead.id, 1, timedelta(minutes=9))], ProgressDelta())
    crashed = await running(store, timedelta(minutes=10))
    alive = await running(store, timedelta(seconds=1))
    await store.save(alive.id, [waiting_row(alive.id, 1, timedelta(hours=1))], ProgressDelta())

    start = (await events.read(after=None, limit=1))[-1].sequence
    recovered = await OrphanRecovery(store, store, orphan_age=300).run(utcnow())
    assert {r.id for r in recovered} == {dead.id, crashed.id}
    row = await store.get_row(dead.id, 1)
    assert row is not None and (row.state, row.error_type, row.error_message) == (
        RowState.FAILED,
        ErrorType.SIGNAL_FAILURE,
        ROW_MESSAGE,
    )
    failed_dead = await store.get(dead.id)
    assert failed_dead is not None and failed_dead.status is OperationStatus.FAILED
    assert failed_dead.error_count == 1
    failed_crashed = await store.get(crashed.id)
    assert failed_crashed is not None and failed_crashed.error_message == CRASHED_MESSAGE
    still = await store.get(alive.id)
    assert still is not None and still.status is OperationStatus.RUNNING
    feed = await events.read(after=start, limit=10)
    assert [e.type for e in feed] == [EventType.FAILED, EventType.FAILED]


class DownStore(MemoryStore):
    async def running(self) -> list[OperationRecord]:
        raise StorageError("database write failed: OperationalError: unable to open")


async def test_an_unreachable_database_logs_a_warning_and_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = DownStore()
    with caplog.at_level(logging.WARNING, logger="bulkops.engine"):
        recovered = await OrphanRecovery(store, store, orphan_age=1).run(utcnow())
    assert recovered == []
    assert any("Orphaned step recovery skipped" in r.message for r in caplog.records)
