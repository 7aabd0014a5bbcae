"""Building feed events for operation life-cycle transitions and failed rows."""

from __future__ import annotations

from datetime import datetime

from bulkops.storage.records import EventRecord, OperationRecord
from bulkops.storage.states import EventType, OperationStatus, Severity


def operation_event(
    record: OperationRecord,
    type_: EventType,
    message: str,
    now: datetime,
    severity: Severity = Severity.INFO,
) -> EventRecord:
    """An event about one operation."""
    return EventRecord(
        operation_id=record.id,
        operation_name=record.operation_name,
        type=type_,
        severity=severity,
        message=message,
        timestamp=now,
    )


def status_changed(
    record: OperationRecord, previous: OperationStatus, now: datetime
) -> EventRecord:
    """A StatusChanged event for a non-terminal move (e.g. Pending -> Running)."""
    return operation_event(
        record,
        EventType.STATUS_CHANGED,
        f"Status changed from {previous.value} to {record.status.value}",
        now,
    )


def finished(record: OperationRecord, now: datetime) -> EventRecord:
    """The event for an operation that reached a terminal status."""
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
