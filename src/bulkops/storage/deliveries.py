"""Which notifications a change of an operation causes: triggers by name, and the outbox
deliveries written in the change's own transaction (so a crash never loses one)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bulkops.storage.records import DeliveryRecord, EventRecord, OperationRecord
from bulkops.storage.states import EventType, OperationStatus

TRIGGERS = (
    "OnCompletion",
    "OnCompletionWithErrors",
    "OnFailure",
    "OnCancelled",
    "OnStatusChange",
)
SHORTHANDS = {
    "OnTerminal": ("OnCompletion", "OnCompletionWithErrors", "OnFailure", "OnCancelled"),
    "All": TRIGGERS,
}
DEFAULT_TRIGGERS = ("OnFailure",)
_STATUS_EVENTS = {
    EventType.STATUS_CHANGED,
    EventType.COMPLETED,
    EventType.FAILED,
    EventType.CANCELLED,
}


def expand_triggers(names: Sequence[str]) -> list[str]:
    """Trigger names with the shorthands spelled out, each once.

    Raises:
        ValueError: a name that is neither a trigger nor a shorthand.
    """
    expanded: list[str] = []
    for name in names:
        if name in SHORTHANDS:
            expanded.extend(SHORTHANDS[name])
        elif name in TRIGGERS:
            expanded.append(name)
        else:
            raise ValueError(
                f"unknown trigger {name!r} (known: {', '.join(TRIGGERS)}, OnTerminal, All)"
            )
    return list(dict.fromkeys(expanded))


def _fired(event: EventRecord, status: OperationStatus) -> set[str]:
    """The triggers an event fires, given the operation's status after it."""
    fired: set[str] = set()
    if event.type in _STATUS_EVENTS:
        fired.add("OnStatusChange")
    if event.type is EventType.COMPLETED:
        with_errors = status is OperationStatus.COMPLETED_WITH_ERRORS
        fired.add("OnCompletionWithErrors" if with_errors else "OnCompletion")
    elif event.type is EventType.FAILED:
        fired.add("OnFailure")
    elif event.type is EventType.CANCELLED:
        fired.add("OnCancelled")
    return fired


def operation_summary(record: OperationRecord) -> dict[str, Any]:
    """The operation as a notification shows it (the API's camelCase, nulls left out)."""
    values: dict[str, Any] = {
        "id": str(record.id),
        "operationName": record.operation_name,
        "status": record.status.value,
        "createdBy": record.created_by,
        "createdAt": _iso(record.created_at),
        "startedAt": _iso(record.started_at),
        "completedAt": _iso(record.completed_at),
        "totalRows": record.total_rows,
        "processedRows": record.processed_rows,
        "successfulRows": record.successful_rows,
        "errorCount": record.error_count,
        "retryCount": record.retry_count,
        "source": record.source,
        "fileName": record.file_name,
        "fileSize": record.file_size,
        "metadata": record.metadata,
        "errorMessage": record.error_message,
    }
    return {key: value for key, value in values.items() if value is not None}


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def deliveries_for(
    record: OperationRecord, events: Sequence[EventRecord]
) -> tuple[DeliveryRecord, ...]:
    """The deliveries ``events`` cause for the recipients of ``record`` (the operation as
    the change leaves it): one per recipient and event whose triggers it fires."""
    recipients = (record.notifications or {}).get("recipients") or []
    if not recipients or not events:
        return ()
    found = []
    summary = operation_summary(record)
    for event in events:
        fired = _fired(event, record.status)
        if not fired:
            continue
        for recipient in recipients:
            wanted = recipient.get("triggers") or list(DEFAULT_TRIGGERS)
            matched = [name for name in wanted if name in fired]
            if not matched:
                continue
            occurred = _iso(event.timestamp)
            found.append(
                DeliveryRecord(
                    id=uuid.uuid4(),
                    operation_id=record.id,
                    channel=str(recipient.get("channel")),
                    target=str(recipient.get("target")),
                    trigger=matched[0],
                    event=event.type.value,
                    payload={
                        "event": event.type.value,
                        "operation": summary,
                        "occurredAt": occurred,
                    },
                    created_at=event.timestamp,
                    next_attempt_at=event.timestamp,
                )
            )
    return tuple(found)
