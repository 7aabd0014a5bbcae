"""The domain's state changes: the operation table, the row table, and what each change sets
and emits."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bulkops.errors import IllegalTransition
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import RowCounts
from bulkops.storage.records import OperationRecord, RowRecord, StepState, WaitOutcome
from bulkops.storage.states import (
    ErrorType,
    EventType,
    OperationStatus,
    RowState,
    Severity,
    can_transition,
)

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=90)


def operation(**overrides: object) -> OperationRecord:
    record = OperationRecord(
        id=uuid.uuid4(),
        operation_name="import",
        status=OperationStatus.PENDING,
        created_by="ann",
        created_at=T0,
        source="default",
        file_id="f",
        file_name="f.csv",
        file_size=10,
        file_format="csv",
        metadata={},
        total_rows=5,
    )
    return replace(record, **overrides)  # type: ignore[arg-type]


TERMINAL_CHANGES = {
    OperationStatus.COMPLETED: lambda r: lifecycle.finish(r, RowCounts(5, 0), T1),
    OperationStatus.COMPLETED_WITH_ERRORS: lambda r: lifecycle.finish(r, RowCounts(3, 2), T1),
    OperationStatus.FAILED: lambda r: lifecycle.fail(r, "broken", T1),
    OperationStatus.CANCELLED: lambda r: lifecycle.cancel(r, T1),
    OperationStatus.RETRYING: lambda r: lifecycle.begin_retry(r, T1),
}


@pytest.mark.parametrize(
    ("source", "target"), list(itertools.product(OperationStatus, TERMINAL_CHANGES))
)
def test_changes_follow_the_transition_table(
    source: OperationStatus, target: OperationStatus
) -> None:
    record = operation(status=source, version=3, worker_id="w")
    compute = TERMINAL_CHANGES[target]
    if not can_transition(source, target):
        with pytest.raises(IllegalTransition):
            compute(record)
        return
    change = compute(record)
    assert change.expected_version == 3 and change.values["version"] == 4
    assert change.record.status is target == change.values["status"]
    assert change.record == replace(record, **change.values)
    assert len(change.events) == 1


def test_a_retry_round_ends_from_retrying_and_a_first_run_from_running() -> None:
    assert can_transition(OperationStatus.RETRYING, OperationStatus.COMPLETED)
    assert can_transition(OperationStatus.RUNNING, OperationStatus.COMPLETED_WITH_ERRORS)
    assert not can_transition(OperationStatus.RETRYING, OperationStatus.RUNNING)
    assert not can_transition(OperationStatus.CANCELLED, OperationStatus.COMPLETED)


def test_claim_of_pending_starts_running_with_an_event() -> None:
    change = lifecycle.claim(operation(), "w1", T1)
    assert change.values == {
        "status": OperationStatus.RUNNING,
        "started_at": T1,
        "worker_id": "w1",
        "heartbeat_at": T1,
        "version": 1,
    }
    (event,) = change.events
    assert (event.type, event.message) == (
        EventType.STATUS_CHANGED,
        "Status changed from Pending to Running",
    )


def test_claim_keeps_the_first_start_and_holds_a_retry_round_without_a_status_change() -> None:
    again = lifecycle.claim(operation(started_at=T0), "w", T1)
    assert again.values["started_at"] == T0
    retry = lifecycle.claim(operation(status=OperationStatus.RETRYING), "w", T1)
    assert retry.values == {"worker_id": "w", "heartbeat_at": T1, "version": 1}
    assert retry.events == ()
    for unclaimable in (
        operation(status=OperationStatus.RUNNING),
        operation(status=OperationStatus.RETRYING, worker_id="other"),
        operation(status=OperationStatus.COMPLETED),
    ):
        with pytest.raises(IllegalTransition):
            lifecycle.claim(unclaimable, "w", T1)


def test_take_over_resumes_with_recounted_counters_and_a_warning() -> None:
    held = operation(status=OperationStatus.RUNNING, worker_id="gone", heartbeat_at=T0)
    change = lifecycle.take_over(held, "new", RowCounts(2, 1), T1)
    assert change.values["worker_id"] == "new" and change.values["resume_count"] == 1
    assert (change.record.processed_rows, change.record.error_count) == (3, 1)
    (event,) = change.events
    assert event.severity is Severity.WARNING
    assert "resumed after its worker stopped responding" in event.message
    with pytest.raises(IllegalTransition):
        lifecycle.take_over(operation(), "new", RowCounts(), T1)


def test_release_hands_running_back_to_pending_and_keeps_a_retry_round() -> None:
    running = operation(status=OperationStatus.RUNNING, worker_id="w", heartbeat_at=T0)
    change = lifecycle.release(running, T1)
    assert change.values["status"] is OperationStatus.PENDING
    assert (change.values["worker_id"], change.values["heartbeat_at"]) == (None, None)
    assert "handed back" in change.events[0].message
    retrying = operation(status=OperationStatus.RETRYING, worker_id="w")
    kept = lifecycle.release(retrying, T1)
    assert kept.record.status is OperationStatus.RETRYING and kept.record.worker_id is None


def test_finish_takes_its_counters_from_the_rows_and_summarises() -> None:
    running = operation(status=OperationStatus.RUNNING, started_at=T0, processed_rows=99)
    change = lifecycle.finish(running, RowCounts(3, 2), T1)
    assert change.record.status is OperationStatus.COMPLETED_WITH_ERRORS
    assert (change.record.processed_rows, change.record.successful_rows) == (5, 3)
    (event,) = change.events
    assert (event.type, event.severity) == (EventType.COMPLETED, Severity.WARNING)
    assert event.message == "3 of 5 rows succeeded in 90.0 s; 2 failed"


def test_begin_retry_counts_the_round_and_clears_the_end() -> None:
    done = operation(
        status=OperationStatus.COMPLETED_WITH_ERRORS, completed_at=T0, retry_count=1, resume_count=2
    )
    change = lifecycle.begin_retry(done, T1)
    assert change.record.retry_count == 2 and change.record.completed_at is None
    assert change.record.resume_count == 0 and change.record.worker_id is None


# --- rows ---------------------------------------------------------------------------------


def test_row_transitions_are_one_table() -> None:
    lifecycle.check_row_move(RowState.FAILED, RowState.PENDING)
    lifecycle.check_row_move(RowState.WAITING_FOR_COMPLETION, RowState.RUNNING)
    for source, target in [
        (RowState.COMPLETED, RowState.PENDING),
        (RowState.COMPLETED, RowState.FAILED),
        (RowState.FAILED, RowState.COMPLETED),
        (RowState.WAITING_FOR_COMPLETION, RowState.COMPLETED),
    ]:
        with pytest.raises(IllegalTransition):
            lifecycle.check_row_move(source, target)


def waiting_row() -> RowRecord:
    steps = [
        StepState("a", 0, RowState.COMPLETED, 1, T0, T0),
        StepState("b", 1, RowState.WAITING_FOR_COMPLETION, 1, T0, signal_key="k"),
        StepState("c", 2),
    ]
    return RowRecord(
        uuid.uuid4(),
        4,
        RowState.WAITING_FOR_COMPLETION,
        step_index=1,
        step_name="b",
        signal_key="k",
        waiting_since=T0,
        steps=steps,
    )


def test_a_wait_ends_by_success_or_failure() -> None:
    row = waiting_row()
    go_on = lifecycle.resolve_wait(row, WaitOutcome(1, True, T1))
    assert go_on.state is RowState.RUNNING and go_on.steps[1].state is RowState.COMPLETED
    failed = lifecycle.resolve_wait(row, WaitOutcome(1, False, T1, ErrorType.TIMEOUT, "late"))
    assert (failed.state, failed.error_type, failed.completed_at) == (
        RowState.FAILED,
        ErrorType.TIMEOUT,
        T1,
    )
    assert row.steps[1].state is RowState.WAITING_FOR_COMPLETION  # a copy was changed
    with pytest.raises(IllegalTransition):
        lifecycle.resolve_wait(failed, WaitOutcome(1, True, T1))


def test_the_retry_reset_restarts_the_failed_step_and_its_clock() -> None:
    failed = lifecycle.resolve_wait(
        waiting_row(), WaitOutcome(1, False, T1, ErrorType.TIMEOUT, "late")
    )
    reset = lifecycle.reset_for_retry(failed)
    assert (reset.state, reset.retry_attempt, reset.error_type) == (RowState.PENDING, 1, None)
    assert (reset.waiting_since, reset.signal_key, reset.completed_at) == (None, None, None)
    assert reset.steps[0] == failed.steps[0]  # completed: skipped on the retry
    assert reset.steps[1] == StepState("b", 1, RowState.PENDING, attempts=1)
    snapshot = lifecycle.retry_snapshot(failed)
    assert (snapshot.attempt, snapshot.error_type, snapshot.failed_at) == (0, ErrorType.TIMEOUT, T1)
    with pytest.raises(IllegalTransition):
        lifecycle.reset_for_retry(reset)


def test_a_signalled_failure_is_attributed_to_its_sender_until_a_reset() -> None:
    outcome = WaitOutcome(1, False, T1, ErrorType.SIGNAL_FAILURE, "no", actor="olga")
    failed = lifecycle.resolve_wait(waiting_row(), outcome)
    assert failed.steps[1].actor == "olga"
    assert StepState.from_json(failed.steps[1].to_json()) == failed.steps[1]
    assert "actor" not in failed.steps[0].to_json()
    event = lifecycle.row_failed_event(operation(), failed, T1)
    assert (event.type, event.actor) == (EventType.ROW_FAILED, "olga")
    timed_out = lifecycle.resolve_wait(waiting_row(), WaitOutcome(1, False, T1))
    assert lifecycle.row_failed_event(operation(), timed_out, T1).actor == "system"
    assert lifecycle.reset_for_retry(failed).steps[1].actor is None
    assert lifecycle.reset_for_restart(failed, 0).steps[1].actor is None


def test_a_row_operation_row_keeps_its_restart_number_in_one_step() -> None:
    row = RowRecord(uuid.uuid4(), 2, RowState.COMPLETED, step_name="process")
    first = lifecycle.reset_for_restart(row, 0)
    assert [(s.name, s.index, s.restart) for s in first.steps] == [("process", 0, 1)]
    done = replace(first, state=RowState.COMPLETED, steps=[replace(first.steps[0])])
    assert lifecycle.reset_for_restart(done, 0).steps[0].restart == 2


def test_start_waiting_stamps_the_wait() -> None:
    row = RowRecord(
        uuid.uuid4(), 1, RowState.RUNNING, steps=[StepState("s", 0, RowState.RUNNING, 1, T0)]
    )
    waiting = lifecycle.start_waiting(row, 0, "op:k:1", T1)
    assert (waiting.state, waiting.signal_key, waiting.waiting_since) == (
        RowState.WAITING_FOR_COMPLETION,
        "op:k:1",
        T1,
    )
    assert waiting.steps[0].state is RowState.WAITING_FOR_COMPLETION
    assert row.state is RowState.RUNNING
