"""Idempotency keys of restarted steps, and the restart reset of a row."""

from __future__ import annotations

import uuid

import pytest

from bulkops.definition.row_context import RowContext
from bulkops.errors import IllegalTransition
from bulkops.storage import lifecycle
from bulkops.storage.records import RowRecord, StepState
from bulkops.storage.states import RowState

OPERATION = uuid.UUID(int=7)


def context(restart: int) -> RowContext:
    return RowContext(OPERATION, "op", 3, None, "Send", 1, 1, 0, "ada", restart=restart)


def test_a_step_never_restarted_keeps_its_key_and_a_restarted_one_gets_r_n() -> None:
    assert context(0).idempotency_key == f"{OPERATION}:3:1"
    assert context(2).idempotency_key == f"{OPERATION}:3:1:r2"


def test_the_restart_reset_clears_that_step_and_the_later_ones_with_the_next_number() -> None:
    done = RowState.COMPLETED
    row = RowRecord(
        OPERATION,
        3,
        done,
        steps=[
            StepState("A", 0, done, 1),
            StepState("B", 1, done, 1, restart=1),
            StepState("C", 2, done, 2, restart=1),
        ],
    )
    reset = lifecycle.reset_for_restart(row, 2)
    assert reset.state is RowState.PENDING and reset.retry_attempt == 1
    assert [(s.state, s.restart, s.attempts) for s in reset.steps] == [
        (done, 0, 1),
        (done, 1, 1),
        (RowState.PENDING, 2, 0),
    ]
    assert StepState.from_json(reset.steps[2].to_json()) == reset.steps[2]
    assert "restart" not in StepState("A", 0).to_json()  # stored as before when never
    with pytest.raises(IllegalTransition):
        lifecycle.reset_for_restart(RowRecord(OPERATION, 1, RowState.RUNNING), 0)


def test_a_round_takes_its_reset_rows_out_of_the_counters() -> None:
    from dataclasses import replace
    from datetime import UTC, datetime

    from bulkops.storage.records import OperationRecord
    from bulkops.storage.states import OperationStatus

    now = datetime(2026, 1, 1, tzinfo=UTC)
    record = OperationRecord(
        OPERATION,
        "op",
        OperationStatus.COMPLETED_WITH_ERRORS,
        "ada",
        now,
        "api",
        "f",
        "f.csv",
        1,
        "csv",
        {},
    )
    record = replace(record, total_rows=30, processed_rows=30, successful_rows=14, error_count=16)
    change = lifecycle.begin_retry(record, now, failed=16, completed=2, actor="bob")
    after = change.record
    assert (after.processed_rows, after.successful_rows, after.error_count) == (12, 12, 0)
    assert [e.actor for e in change.events] == ["bob"]
