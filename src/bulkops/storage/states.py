"""Status and state enumerations, and the one table of legal operation transitions."""

from __future__ import annotations

from enum import StrEnum


class OperationStatus(StrEnum):
    """Life-cycle status of an operation."""

    PENDING = "Pending"  # stored, waiting for a worker to claim it
    RUNNING = "Running"  # claimed by a worker that is processing rows
    COMPLETED = "Completed"  # every row succeeded
    COMPLETED_WITH_ERRORS = "CompletedWithErrors"  # finished, some rows failed
    FAILED = "Failed"  # the operation failed as a whole (bad file, metadata, stuck, crash)
    CANCELLED = "Cancelled"  # a user cancelled it; unprocessed rows stay unprocessed
    RETRYING = "Retrying"  # failed rows were reset and wait for a worker to claim them

    @property
    def is_terminal(self) -> bool:
        """True for the statuses a polling client stops at."""
        return self in TERMINAL_STATUSES

    @classmethod
    def parse(cls, text: str) -> OperationStatus | None:
        """Match a status name case-insensitively; None when unknown."""
        folded = text.strip().casefold()
        return next((s for s in cls if s.value.casefold() == folded), None)


TERMINAL_STATUSES = frozenset(
    {
        OperationStatus.COMPLETED,
        OperationStatus.COMPLETED_WITH_ERRORS,
        OperationStatus.FAILED,
        OperationStatus.CANCELLED,
    }
)

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
    OperationStatus.RETRYING: frozenset({OperationStatus.COMPLETED_WITH_ERRORS}),
    # A stopping worker that cannot drain in time hands its operation back.
    OperationStatus.PENDING: frozenset({OperationStatus.RUNNING}),
}


def allowed_sources(target: OperationStatus) -> frozenset[OperationStatus]:
    """Statuses from which ``target`` may be reached."""
    return TRANSITIONS.get(target, frozenset())


def can_transition(source: OperationStatus, target: OperationStatus) -> bool:
    """True when the table allows moving from ``source`` to ``target``."""
    return source in allowed_sources(target)


class RowState(StrEnum):
    """State of one row record."""

    PENDING = "Pending"  # known but not yet run (or reset by a retry)
    RUNNING = "Running"  # a step is executing
    WAITING_FOR_COMPLETION = "WaitingForCompletion"  # an async step waits for a signal or poll
    COMPLETED = "Completed"  # every step succeeded
    FAILED = "Failed"  # validation or a step failed

    @property
    def is_final(self) -> bool:
        """True when the row will not run again unless retried."""
        return self in (RowState.COMPLETED, RowState.FAILED)

    @classmethod
    def parse(cls, text: str) -> RowState | None:
        """Match a state name case-insensitively; None when unknown."""
        folded = text.strip().casefold()
        return next((s for s in cls if s.value.casefold() == folded), None)


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


class ErrorType(StrEnum):
    """Why a row failed."""

    VALIDATION = "Validation"  # parse, conversion or row validation failed; never retried
    PROCESSING = "Processing"  # any other exception in validate_row or process_row
    STEP_FAILURE = "StepFailure"  # a pipeline step raised after its own retries
    TIMEOUT = "Timeout"  # an async step's timeout elapsed
    SIGNAL_FAILURE = "SignalFailure"  # a failure signal, or orphaned-step recovery

    @classmethod
    def parse(cls, text: str) -> ErrorType | None:
        """Match an error type name case-insensitively; None when unknown."""
        folded = text.strip().casefold()
        return next((s for s in cls if s.value.casefold() == folded), None)


class EventType(StrEnum):
    """Kinds of event recorded in the feed."""

    CREATED = "Created"
    STATUS_CHANGED = "StatusChanged"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    ROW_FAILED = "RowFailed"


class Severity(StrEnum):
    """Severity of an event."""

    INFO = "Info"
    WARNING = "Warning"
    ERROR = "Error"
