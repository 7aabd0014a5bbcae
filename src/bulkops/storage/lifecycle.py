"""Every state change of the domain, as plain functions: the new values and their events.

Operations move by the transition table in ``states``; each move is an ``OperationChange``
that names the fields it sets, the concurrency token the stored record must still carry,
and the feed events it causes. A store persists a change and its events in one
transaction and nothing else, so the rules live here once, for every adapter.

Rows and their steps move by ``ROW_TRANSITIONS``; the functions below return new records
(the engine keeps rows it is running as mutable records on its hot path and uses these for
every other move: waiting, a wait's end, the retry reset, recovery).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from bulkops.errors import IllegalTransition
from bulkops.storage.deliveries import deliveries_for
from bulkops.storage.records import (
    DeliveryRecord,
    EventRecord,
    OperationRecord,
    RetryRequest,
    RetrySnapshot,
    RowRecord,
    StepState,
    WaitOutcome,
)
from bulkops.storage.states import (
    EventType,
    OperationStatus,
    RowState,
    Severity,
    allowed_sources,
)

_RUNNING = OperationStatus.RUNNING
_RETRYING = OperationStatus.RETRYING
# Statuses in which a worker holds an operation and renews its heartbeat.
HELD_STATUSES = frozenset({_RUNNING, _RETRYING})


@dataclass(frozen=True, slots=True)
class RowCounts:
    """How many stored rows reached each final state."""

    completed: int = 0
    failed: int = 0

    @property
    def processed(self) -> int:
        """Rows in a final state."""
        return self.completed + self.failed


@dataclass(frozen=True, slots=True)
class OperationChange:
    """A change of one operation: the fields it sets (the token included), the token the
    stored record must still carry, the record as it will be, and the events it causes."""

    operation_id: UUID
    expected_version: int
    values: dict[str, Any]
    record: OperationRecord
    events: tuple[EventRecord, ...] = field(default=())
    deliveries: tuple[DeliveryRecord, ...] = field(default=())  # notifications it causes


def _change(
    record: OperationRecord, events: Sequence[EventRecord] = (), **values: Any
) -> OperationChange:
    values["version"] = record.version + 1
    after = replace(record, **values)
    return OperationChange(
        operation_id=record.id,
        expected_version=record.version,
        values=values,
        record=after,
        events=tuple(events),
        deliveries=deliveries_for(after, events),
    )


def _require(record: OperationRecord, target: OperationStatus) -> None:
    if record.status not in allowed_sources(target):
        raise IllegalTransition(
            f"Operation {record.id} cannot move from {record.status.value} to {target.value}"
        )


def _counters(counts: RowCounts) -> dict[str, int]:
    return {
        "processed_rows": counts.processed,
        "successful_rows": counts.completed,
        "error_count": counts.failed,
    }


# --- events -------------------------------------------------------------------------------


def operation_event(
    record: OperationRecord,
    type_: EventType,
    message: str,
    now: datetime,
    severity: Severity = Severity.INFO,
    actor: str = "system",
) -> EventRecord:
    """An event about one operation, caused by ``actor``."""
    return EventRecord(
        operation_id=record.id,
        operation_name=record.operation_name,
        type=type_,
        severity=severity,
        message=message,
        timestamp=now,
        tenant=record.tenant,
        actor=actor,
    )


def created_event(record: OperationRecord, now: datetime) -> EventRecord:
    """The Created event of a new operation; its actor is the creator."""
    message = f"Created by {record.created_by} from {record.file_name} ({record.file_size} bytes)"
    return operation_event(record, EventType.CREATED, message, now, actor=record.created_by)


def attributed(change: OperationChange, actor: str) -> OperationChange:
    """The change with its events caused by ``actor`` (a request's, not the service's)."""
    return replace(change, events=tuple(replace(e, actor=actor) for e in change.events))


def row_fixed_event(
    record: OperationRecord, row_number: int, columns: Sequence[str], now: datetime, actor: str
) -> EventRecord:
    """The RowFixed event of a row whose data was fixed in place: it names the columns
    whose values changed."""
    changed = ", ".join(columns) if columns else "none"
    return operation_event(
        record, EventType.ROW_FIXED, f"Row {row_number} fixed: {changed} changed", now, actor=actor
    )


def changed_columns(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """The columns whose values differ between two versions of a row's data, in the
    order of ``after`` (then those only ``before`` had)."""
    before = before or {}
    names = [name for name in after if before.get(name) != after[name] or name not in before]
    return names + [name for name in before if name not in after]


def _status_changed(
    before: OperationRecord,
    after: OperationRecord,
    now: datetime,
    note: str = "",
    actor: str = "system",
) -> EventRecord:
    message = f"Status changed from {before.status.value} to {after.status.value}{note}"
    severity = Severity.WARNING if note else Severity.INFO
    return operation_event(after, EventType.STATUS_CHANGED, message, now, severity, actor)


def finished_event(record: OperationRecord, now: datetime) -> EventRecord:
    """The event of an operation that reached a terminal status."""
    status = record.status
    if status in (OperationStatus.COMPLETED, OperationStatus.COMPLETED_WITH_ERRORS):
        elapsed = ""
        if record.started_at is not None:
            elapsed = f" in {(now - record.started_at).total_seconds():.1f} s"
        message = f"{record.successful_rows} of {record.total_rows} rows succeeded{elapsed}" + (
            f"; {record.error_count} failed" if record.error_count else ""
        )
        severity = Severity.WARNING if record.error_count else Severity.INFO
        return operation_event(record, EventType.COMPLETED, message, now, severity)
    if status is OperationStatus.CANCELLED:
        return operation_event(
            record,
            EventType.CANCELLED,
            f"Cancelled after {record.processed_rows} of {record.total_rows} rows",
            now,
        )
    return operation_event(
        record,
        EventType.FAILED,
        f"Operation failed: {record.error_message or 'unknown error'}",
        now,
        Severity.ERROR,
    )


def row_failed_event(record: OperationRecord, row: RowRecord, now: datetime) -> EventRecord:
    """The RowFailed event of a row that reached Failed: caused by whoever failed its
    step by a signal, otherwise by the service."""
    error = row.error_type.value if row.error_type else "Error"
    signalled = next((s.actor for s in row.steps if s.index == row.step_index), None)
    return operation_event(
        record,
        EventType.ROW_FAILED,
        f"Row {row.row_number} failed at {row.step_name} ({error}): {row.error_message}",
        now,
        Severity.ERROR,
        actor=signalled or "system",
    )


# --- operation transitions ----------------------------------------------------------------


def claim(record: OperationRecord, worker_id: str, now: datetime) -> OperationChange:
    """A worker takes a claimable operation: Pending becomes Running (first start sets
    ``started_at``); a Retrying operation nobody holds stays Retrying, now held."""
    if record.worker_id is not None or record.status not in (OperationStatus.PENDING, _RETRYING):
        raise IllegalTransition(f"Operation {record.id} is not claimable ({record.status.value})")
    if record.status is _RETRYING:
        return _change(record, worker_id=worker_id, heartbeat_at=now)
    after = replace(record, status=_RUNNING)
    return _change(
        record,
        [_status_changed(record, after, now)],
        status=_RUNNING,
        started_at=record.started_at or now,
        worker_id=worker_id,
        heartbeat_at=now,
    )


def take_over(
    record: OperationRecord, worker_id: str, counts: RowCounts, now: datetime
) -> OperationChange:
    """A worker takes an abandoned operation (its holder's heartbeat stopped) to resume it.

    The status stays; the counters are recomputed from the stored rows, so rows the last
    holder ran but never stored do not count.
    """
    if record.status not in HELD_STATUSES:
        raise IllegalTransition(f"Operation {record.id} is not held ({record.status.value})")
    last = record.heartbeat_at.isoformat() if record.heartbeat_at else "never"
    event = operation_event(
        record,
        EventType.STATUS_CHANGED,
        f"Status {record.status.value}: resumed after its worker stopped responding "
        f"(last heartbeat {last})",
        now,
        Severity.WARNING,
    )
    return _change(
        record,
        [event],
        worker_id=worker_id,
        heartbeat_at=now,
        resume_count=record.resume_count + 1,
        **_counters(counts),
    )


def release(record: OperationRecord, now: datetime) -> OperationChange:
    """A stopping worker hands its operation back with its progress kept: Running becomes
    Pending; a Retrying one stays Retrying, held by nobody."""
    if record.status is _RETRYING:
        return _change(record, worker_id=None, heartbeat_at=None)
    _require(record, OperationStatus.PENDING)
    after = replace(record, status=OperationStatus.PENDING)
    return _change(
        record,
        [_status_changed(record, after, now, "; handed back by a stopping worker")],
        status=OperationStatus.PENDING,
        worker_id=None,
        heartbeat_at=None,
    )


def split(record: OperationRecord, total: int, chunks: int, now: datetime) -> OperationChange:
    """The worker that claimed a large operation hands it to its ``chunks``: the operation
    stays Running, held by nobody (each chunk is held by the worker processing it), its
    rows counted."""
    if record.status is not _RUNNING:
        raise IllegalTransition(f"Operation {record.id} is not Running ({record.status.value})")
    event = operation_event(
        record,
        EventType.STATUS_CHANGED,
        f"Status Running: split into {chunks} chunks of its {total} rows for every worker",
        now,
    )
    return _change(record, [event], worker_id=None, heartbeat_at=None, total_rows=total)


def finish(record: OperationRecord, counts: RowCounts, now: datetime) -> OperationChange:
    """Processing ended: Completed, or CompletedWithErrors when a stored row failed; the
    counters come from the stored row states."""
    target = OperationStatus.COMPLETED_WITH_ERRORS if counts.failed else OperationStatus.COMPLETED
    return _terminal(record, target, now, **_counters(counts))


def fail(
    record: OperationRecord, message: str, now: datetime, counts: RowCounts | None = None
) -> OperationChange:
    """The operation failed as a whole, with ``message``."""
    values: dict[str, Any] = {"error_message": message}
    if counts is not None:
        values.update(_counters(counts))
    return _terminal(record, OperationStatus.FAILED, now, **values)


def cancel(
    record: OperationRecord, now: datetime, *, action_id: UUID | None = None
) -> OperationChange:
    """A user cancelled the operation; rows not yet processed stay unprocessed. A bulk
    action's cancel records it as the operation's ``last_action_id``."""
    if action_id is not None:
        return _terminal(record, OperationStatus.CANCELLED, now, last_action_id=action_id)
    return _terminal(record, OperationStatus.CANCELLED, now)


def _terminal(
    record: OperationRecord, target: OperationStatus, now: datetime, **values: Any
) -> OperationChange:
    _require(record, target)
    after = replace(record, status=target, completed_at=now, **values)
    return _change(record, [finished_event(after, now)], status=target, completed_at=now, **values)


def begin_retry(
    record: OperationRecord,
    now: datetime,
    *,
    failed: int = 0,
    completed: int = 0,
    actor: str = "system",
    action_id: UUID | None = None,
) -> OperationChange:
    """Rows were reset (``failed`` Failed ones, ``completed`` Completed ones a restart
    chose): CompletedWithErrors (or Completed, for a restart) becomes Retrying, one more
    retry round, nobody holding it yet. The reset rows leave the counters at once, so the
    round's rows count again from there and never past the totals."""
    _require(record, _RETRYING)
    after = replace(record, status=_RETRYING)
    extra: dict[str, Any] = {} if action_id is None else {"last_action_id": action_id}
    return _change(
        record,
        [_status_changed(record, after, now, actor=actor)],
        **extra,
        processed_rows=max(record.processed_rows - failed - completed, 0),
        successful_rows=max(record.successful_rows - completed, 0),
        error_count=max(record.error_count - failed, 0),
        status=_RETRYING,
        retry_count=record.retry_count + 1,
        completed_at=None,
        error_message=None,
        worker_id=None,
        heartbeat_at=None,
        resume_count=0,
    )


# --- rows and steps -----------------------------------------------------------------------

# target state -> states it may be reached from (a new row starts from Pending).
ROW_TRANSITIONS: dict[RowState, frozenset[RowState]] = {
    RowState.RUNNING: frozenset({RowState.PENDING, RowState.WAITING_FOR_COMPLETION}),
    RowState.WAITING_FOR_COMPLETION: frozenset({RowState.PENDING, RowState.RUNNING}),
    RowState.COMPLETED: frozenset({RowState.PENDING, RowState.RUNNING}),
    RowState.FAILED: frozenset(
        {RowState.PENDING, RowState.RUNNING, RowState.WAITING_FOR_COMPLETION}
    ),
    RowState.PENDING: frozenset({RowState.FAILED}),  # the retry reset
}


def check_row_move(source: RowState, target: RowState) -> None:
    """Raise ``IllegalTransition`` unless a row or step may move from ``source`` to
    ``target``."""
    if source not in ROW_TRANSITIONS.get(target, frozenset()):
        raise IllegalTransition(f"A row cannot move from {source.value} to {target.value}")


def start_waiting(
    row: RowRecord, step_index: int, signal_key: str | None, now: datetime
) -> RowRecord:
    """A copy of a row whose async step now waits (for a signal under ``signal_key``, or
    for its completion check): the wait's clock starts now."""
    steps = [replace(step) for step in row.steps]
    step = steps[step_index]
    check_row_move(step.state, RowState.WAITING_FOR_COMPLETION)
    steps[step_index] = replace(step, state=RowState.WAITING_FOR_COMPLETION, signal_key=signal_key)
    return replace(
        row,
        state=RowState.WAITING_FOR_COMPLETION,
        steps=steps,
        signal_key=signal_key or row.signal_key,
        waiting_since=now,
    )


def resolve_wait(row: RowRecord, outcome: WaitOutcome) -> RowRecord:
    """A copy of a waiting row with its wait ended.

    Success marks the step Completed and the row Running again (its pipeline goes on);
    failure marks the step and the row Failed with the outcome's error.
    """
    check_row_move(row.state, RowState.RUNNING if outcome.succeeded else RowState.FAILED)
    steps = [replace(step) for step in row.steps]
    state = RowState.COMPLETED if outcome.succeeded else RowState.FAILED
    if 0 <= outcome.step_index < len(steps):
        steps[outcome.step_index] = replace(
            steps[outcome.step_index],
            state=state,
            completed_at=outcome.at,
            error_type=outcome.error_type,
            error_message=outcome.error_message,
            actor=outcome.actor,
        )
    if outcome.succeeded:
        return replace(row, state=RowState.RUNNING, steps=steps)
    return replace(
        row,
        state=RowState.FAILED,
        steps=steps,
        step_index=outcome.step_index,
        error_type=outcome.error_type,
        error_message=outcome.error_message,
        completed_at=outcome.at,
    )


def retry_snapshot(row: RowRecord) -> RetrySnapshot:
    """The retry history entry of a row about to be reset: a failed one with its error,
    a Completed one a restart runs again with none."""
    return RetrySnapshot(
        operation_id=row.operation_id,
        row_number=row.row_number,
        attempt=row.retry_attempt,
        step_index=row.step_index,
        step_name=row.step_name,
        error_type=row.error_type,
        error_message=row.error_message,
        failed_at=row.completed_at,
    )


def reset_for_retry(row: RowRecord) -> RowRecord:
    """A copy of a failed row reset by a retry: Pending, one more attempt, its error gone.

    Steps it completed stay completed (they are skipped); the step that failed starts
    afresh, its clock included, so a retried signal or polling step gets its whole timeout
    again.
    """
    check_row_move(row.state, RowState.PENDING)
    steps = [
        replace(
            step,
            state=RowState.PENDING,
            started_at=None,
            completed_at=None,
            error_type=None,
            error_message=None,
            signal_key=None,
            actor=None,
        )
        if step.state is not RowState.COMPLETED
        else replace(step)
        for step in row.steps
    ]
    return replace(
        row,
        state=RowState.PENDING,
        retry_attempt=row.retry_attempt + 1,
        error_type=None,
        error_message=None,
        completed_at=None,
        signal_key=None,
        waiting_since=None,
        steps=steps,
    )


def reset_for_restart(row: RowRecord, from_step: int) -> RowRecord:
    """A copy of a Failed or Completed row a restart runs again from step ``from_step``.

    Steps before it keep what they reached (a completed one is skipped, any other runs
    again as after a retry reset); that step and the later ones are cleared and marked
    with the row's new restart number n (one more than any of its steps carries), which
    gives their runs the idempotency key ``...:r{n}``. The row counts one more attempt.
    """
    if row.state not in (RowState.FAILED, RowState.COMPLETED):
        raise IllegalTransition(f"A row cannot move from {row.state.value} to Pending")
    restart = max((step.restart for step in row.steps), default=0) + 1
    steps = [
        replace(
            step,
            state=RowState.PENDING,
            attempts=0 if step.index >= from_step else step.attempts,
            started_at=None,
            completed_at=None,
            error_type=None,
            error_message=None,
            signal_key=None,
            actor=None,
            restart=restart if step.index >= from_step else step.restart,
        )
        if step.index >= from_step or step.state is not RowState.COMPLETED
        else replace(step)
        for step in row.steps
    ]
    if not row.steps:
        # A row operation stores no steps: it keeps one, its ``process`` step
        # (definition.operation.PROCESS_STEP), to carry the row's restart number.
        steps = [StepState("process", 0, restart=restart)]
    return replace(
        row,
        state=RowState.PENDING,
        retry_attempt=row.retry_attempt + 1,
        error_type=None,
        error_message=None,
        completed_at=None,
        signal_key=None,
        waiting_since=None,
        steps=steps,
    )


def retry_sources(request: RetryRequest) -> frozenset[OperationStatus]:
    """The statuses an operation may be in for ``request`` to start a round: a restart
    with ``include_completed`` takes a Completed one too."""
    if request.include_completed:
        return frozenset({OperationStatus.COMPLETED_WITH_ERRORS, OperationStatus.COMPLETED})
    return frozenset({OperationStatus.COMPLETED_WITH_ERRORS})


def qualifies(request: RetryRequest, row: RowRecord, fixed: bool) -> bool:
    """Whether a stored row is reset by ``request`` (its row numbers aside): a Failed row
    at an allowed step (or fixed: at any step), and with ``include_completed`` a Completed
    row."""
    if row.state is RowState.FAILED:
        return row.step_index in request.allowed_steps or fixed
    return request.include_completed and row.state is RowState.COMPLETED


def reset_row(request: RetryRequest, row: RowRecord) -> RowRecord:
    """A qualifying row as ``request`` resets it: from its failed step, or for a restart
    from ``request.from_step``."""
    if request.from_step is None:
        return reset_for_retry(row)
    return reset_for_restart(row, request.from_step)


def retry_round(
    record: OperationRecord, request: RetryRequest, now: datetime, failed: int, completed: int
) -> OperationChange:
    """``begin_retry`` for ``request``, which reset ``failed`` Failed rows and
    ``completed`` Completed ones."""
    return begin_retry(
        record,
        now,
        failed=failed,
        completed=completed,
        actor=request.actor,
        action_id=request.action_id,
    )
