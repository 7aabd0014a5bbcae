"""The values the HTTP contract carries that the server and the client both name: operation
statuses, row states and error types. The server's storage and the client's models use
these same classes, so a status read by the client is the server's enum member."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TERMINAL_STATUSES", "ErrorType", "OperationStatus", "RowState"]


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
