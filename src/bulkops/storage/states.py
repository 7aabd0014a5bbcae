"""Status and state enumerations, and the one table of legal operation transitions.

The statuses, row states and error types the HTTP contract carries live in ``bulkops.wire``
(shared with the client) and are named here too."""

from __future__ import annotations

from enum import StrEnum

from bulkops.wire import TERMINAL_STATUSES, ErrorType, OperationStatus, RowState

__all__ = [
    "CLAIMABLE_STATUSES",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "ChunkState",
    "DeliveryState",
    "ErrorType",
    "EventType",
    "OperationStatus",
    "RowState",
    "Severity",
    "allowed_sources",
    "can_transition",
]


# Statuses a worker may claim (a Retrying operation only while nobody holds it).
CLAIMABLE_STATUSES = frozenset({OperationStatus.PENDING, OperationStatus.RETRYING})

# target status -> statuses it may be reached from. Every change goes through this table
# (``storage.lifecycle``), so an illegal move (say, a worker finishing an operation a user
# already cancelled) is refused instead of overwriting. A retry round is processed in
# Retrying and ends from there, as a first run ends from Running.
TRANSITIONS: dict[OperationStatus, frozenset[OperationStatus]] = {
    OperationStatus.RUNNING: frozenset({OperationStatus.PENDING}),
    OperationStatus.COMPLETED: frozenset({OperationStatus.RUNNING, OperationStatus.RETRYING}),
    OperationStatus.COMPLETED_WITH_ERRORS: frozenset(
        {OperationStatus.RUNNING, OperationStatus.RETRYING}
    ),
    OperationStatus.FAILED: frozenset(
        {OperationStatus.PENDING, OperationStatus.RUNNING, OperationStatus.RETRYING}
    ),
    OperationStatus.CANCELLED: frozenset(
        {OperationStatus.PENDING, OperationStatus.RUNNING, OperationStatus.RETRYING}
    ),
    # A restart with includeCompleted may start a round of a Completed operation too.
    OperationStatus.RETRYING: frozenset(
        {OperationStatus.COMPLETED_WITH_ERRORS, OperationStatus.COMPLETED}
    ),
    # A stopping worker that cannot drain in time hands its operation back.
    OperationStatus.PENDING: frozenset({OperationStatus.RUNNING}),
}


def allowed_sources(target: OperationStatus) -> frozenset[OperationStatus]:
    """Statuses from which ``target`` may be reached."""
    return TRANSITIONS.get(target, frozenset())


def can_transition(source: OperationStatus, target: OperationStatus) -> bool:
    """True when the table allows moving from ``source`` to ``target``."""
    return source in allowed_sources(target)


class ChunkState(StrEnum):
    """State of one row range of a split operation."""

    PENDING = "Pending"  # waiting for a worker to claim it
    RUNNING = "Running"  # held by a worker that renews its heartbeat
    DONE = "Done"  # every row of the range reached a final state


class DeliveryState(StrEnum):
    """State of one notification delivery in the outbox."""

    PENDING = "Pending"  # stored, waiting to be sent (or retried)
    DELIVERED = "Delivered"  # the channel accepted it
    FAILED = "Failed"  # given up: retries exhausted, or refused for good


class EventType(StrEnum):
    """Kinds of event recorded in the feed."""

    CREATED = "Created"
    STATUS_CHANGED = "StatusChanged"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    ROW_FAILED = "RowFailed"
    ROW_FIXED = "RowFixed"


class Severity(StrEnum):
    """Severity of an event."""

    INFO = "Info"
    WARNING = "Warning"
    ERROR = "Error"
