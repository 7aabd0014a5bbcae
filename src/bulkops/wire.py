"""The values the HTTP contract carries that the server and the client both name: operation
statuses, row states and error types. The server's storage and the client's models use
these same classes, so a status read by the client is the server's enum member."""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

__all__ = [
    "TERMINAL_STATUSES",
    "ErrorType",
    "OperationStatus",
    "RowState",
    "escape_formula",
    "unescape_formula",
]


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


# --- spreadsheet-safe CSV cells --------------------------------------------------------
# OWASP's CSV-injection advice: a spreadsheet runs a cell that begins with one of these as
# a formula, so a CSV the service writes puts a ``'`` before such a cell. A plain number
# (``-3``, ``+1.5``) is left alone: it is a value, not a formula.
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _is_formula(text: str) -> bool:
    """True when a spreadsheet could read ``text`` as a formula, or when it already is an
    escaped cell (``'`` before such text): escaping that too keeps the escape reversible,
    so ``unescape_formula(escape_formula(x)) == x`` for every text."""
    while text.startswith("'"):
        text = text[1:]
        if not text.startswith(("'", *FORMULA_TRIGGERS)):
            return False
    return text.startswith(FORMULA_TRIGGERS) and _NUMBER.fullmatch(text) is None


def escape_formula(value: Any) -> Any:
    """A CSV cell safe to open in a spreadsheet: text a spreadsheet would run as a formula
    gets a leading ``'``; anything else (other text, numbers, null) is returned as is."""
    if isinstance(value, str) and _is_formula(value):
        return "'" + value
    return value


# The first characters of the only cells ``escape_formula`` may change.
_FORMULA_FIRST = frozenset(("'", *FORMULA_TRIGGERS))


def escape_cells(cells: Sequence[Any]) -> Sequence[Any]:
    """``escape_formula`` of every cell of a row; the row itself, unchanged, when no cell
    begins as a formula or an escaped one may (most rows: one cheap pass)."""
    for cell in cells:
        if isinstance(cell, str) and cell[:1] in _FORMULA_FIRST:
            return [escape_formula(value) for value in cells]
    return cells


def unescape_formula(value: Any) -> Any:
    """The cell ``escape_formula`` was given: its leading ``'`` removed when it added one;
    anything else is returned as is."""
    if isinstance(value, str) and value.startswith("'") and _is_formula(value[1:]):
        return value[1:]
    return value
