"""Stored records: what the engine and the stores exchange. The API maps them to wire schemas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar
from uuid import UUID

from bulkops.storage.states import (
    ChunkState,
    DeliveryState,
    ErrorType,
    EventType,
    OperationStatus,
    RowState,
    Severity,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """One bulk operation: its submission, status and counters."""

    id: UUID
    operation_name: str
    status: OperationStatus
    created_by: str
    created_at: datetime
    source: str
    file_id: str
    file_name: str
    file_size: int
    file_format: str  # "csv" | "json" | "jsonl"
    metadata: dict[str, Any]
    notifications: dict[str, Any] | None = None
    # File column -> model column, applied before matching (the columnMap form field).
    column_map: dict[str, str] | None = None
    schema_version: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    total_rows: int = 0
    processed_rows: int = 0
    successful_rows: int = 0
    error_count: int = 0
    retry_count: int = 0
    error_message: str | None = None
    # Optimistic concurrency token: incremented by every status change.
    version: int = 0
    # The worker holding a Running (or Retrying) operation and when it last said it is
    # alive; how many times it was resumed after its holder stopped responding.
    worker_id: str | None = None
    heartbeat_at: datetime | None = None
    resume_count: int = 0
    # The tenant of the principal that created it: principals of another tenant never see
    # it. None: created by an unscoped principal (seen only by unscoped principals).
    tenant: str | None = None
    # A dry run validates every row and runs nothing; an operation created from an earlier
    # one reads that one's stored file with its fixed rows' data applied.
    dry_run: bool = False
    source_operation_id: UUID | None = None
    # The worksheet an XLSX operation reads, as the create named it (None: its first one;
    # a run from an earlier operation keeps that operation's).
    sheet: str | None = None
    # Fair sharing: a higher priority runs first (-10..10; the priority form field).
    priority: int = 0
    # An undo operation names the operation it undoes; that one names its undo.
    undo_of: UUID | None = None
    undone_by: UUID | None = None
    # SHA-256 (hex) of the stored file's bytes, taken as they streamed in (None: stored
    # before hashes were kept).
    file_sha256: str | None = None
    # The last bulk action that acted on it, set in the transaction of the act, so an
    # action resumed after a crash knows whether it acted already.
    last_action_id: UUID | None = None


@dataclass(slots=True)
class StepState:
    """Progress of one pipeline step of one row."""

    name: str
    index: int
    state: RowState = RowState.PENDING
    attempts: int = 0
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    signal_key: str | None = None
    # The row's restart (see ``lifecycle.reset_for_restart``) that last cleared this step:
    # 0 until one does; its idempotency key then ends in ``:r{restart}``.
    restart: int = 0
    # Who ended this step's wait by a signal (the ``actor`` of its RowFailed event); None
    # when the service did (the step ran, timed out, or has not ended).
    actor: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (timestamps as ISO text, enums as names)."""
        extra: dict[str, Any] = {"restart": self.restart} if self.restart else {}
        if self.actor is not None:
            extra["actor"] = self.actor
        return {
            **extra,
            "name": self.name,
            "index": self.index,
            "state": self.state.value,
            "attempts": self.attempts,
            "startedAt": self.started_at.isoformat() if self.started_at else None,
            "completedAt": self.completed_at.isoformat() if self.completed_at else None,
            "errorType": self.error_type.value if self.error_type else None,
            "errorMessage": self.error_message,
            "signalKey": self.signal_key,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepState:
        """Inverse of ``to_json``."""
        started, completed = data.get("startedAt"), data.get("completedAt")
        error_type = data.get("errorType")
        return cls(
            name=data["name"],
            index=int(data["index"]),
            state=RowState(data["state"]),
            attempts=int(data.get("attempts", 0)),
            started_at=datetime.fromisoformat(started) if started else None,
            completed_at=datetime.fromisoformat(completed) if completed else None,
            error_type=ErrorType(error_type) if error_type else None,
            error_message=data.get("errorMessage"),
            signal_key=data.get("signalKey"),
            restart=int(data.get("restart", 0)),
            actor=data.get("actor"),
        )


@dataclass(slots=True)
class RowRecord:
    """The tracked outcome of one data row (row numbers are 1-based data rows).

    ``step_index`` is -1 for validation failures; ``steps`` holds per-step progress for
    pipelines and is empty for row-based operations (their single step is ``process``).
    """

    operation_id: UUID
    row_number: int
    state: RowState
    row_id: str | None = None
    step_index: int = 0
    step_name: str | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    retry_attempt: int = 0
    signal_key: str | None = None
    row_data: dict[str, Any] | None = None
    steps: list[StepState] = field(default_factory=list)
    waiting_since: datetime | None = None
    completed_at: datetime | None = None


# What a report of row records shows of each (the export's report mode), in this order:
# plain values that storage can hand out without building a RowRecord per row.
REPORT_FIELDS = (
    "row_number",
    "row_id",
    "state",
    "step_index",
    "step_name",
    "error_type",
    "error_message",
    "retry_attempt",
    "completed_at",
)
ReportValues = tuple[
    int, str | None, str, int, str | None, str | None, str | None, int, datetime | None
]


# What an undo reads of each row of the operation it undoes (``RowStore.outcome_batches``),
# in this order: what the row did and the data it ran with, without a RowRecord per row.
OUTCOME_FIELDS = ("row_number", "state", "row_id", "row_data", "steps")


class RowOutcome(NamedTuple):
    """What one row of an operation did, as its undo reads it: its number, state,
    business key, kept data and per-step progress (a pipeline's; empty otherwise)."""

    row_number: int
    state: RowState
    row_id: str | None
    row_data: dict[str, Any] | None
    steps: list[StepState]


def report_values(row: RowRecord) -> ReportValues:
    """The ``REPORT_FIELDS`` of a row record (states and error types as their text)."""
    return (
        row.row_number,
        row.row_id,
        row.state.value,
        row.step_index,
        row.step_name,
        None if row.error_type is None else row.error_type.value,
        row.error_message,
        row.retry_attempt,
        row.completed_at,
    )


@dataclass(frozen=True, slots=True)
class WaitOutcome:
    """How an async step's wait ended: signalled, failed, or timed out."""

    step_index: int
    succeeded: bool
    at: datetime
    error_type: ErrorType | None = None
    error_message: str | None = None
    actor: str | None = None  # who signalled (None: the service ended the wait)


@dataclass(frozen=True, slots=True)
class RetrySnapshot:
    """The error of a row as it stood when a retry reset it (retry history entry).

    ``attempt`` is the row's ``retry_attempt`` when it failed (0 = the first run).
    """

    operation_id: UUID
    row_number: int
    attempt: int
    step_index: int
    step_name: str | None
    error_type: ErrorType | None
    error_message: str | None
    failed_at: datetime | None


@dataclass(frozen=True, slots=True)
class RetryRequest:
    """Which failed rows a retry resets.

    Rows qualify when they are Failed at a step in ``allowed_steps`` (indexes >= 0, so
    validation failures do not qualify by it), or Failed and fixed (their data replaced by
    ``RowStore.fix_row``: at any step, validation included), and, when ``row_numbers`` is
    given, are among them.
    """

    operation_id: UUID
    expected_version: int
    allowed_steps: tuple[int, ...]
    row_numbers: tuple[int, ...] | None = None
    # A restart (``from_step`` set): the qualifying rows run again from that step (see
    # ``lifecycle.reset_for_restart``); with ``include_completed`` Completed rows qualify
    # too, and a Completed operation may be restarted.
    from_step: int | None = None
    include_completed: bool = False
    actor: str = "system"  # who asked: the ``actor`` of the round's event
    action_id: UUID | None = None  # the bulk action retrying it (``last_action_id``)


@dataclass(frozen=True, slots=True)
class RetryStart:
    """What ``begin_retry`` did: the operation after it and how many rows it reset."""

    record: OperationRecord
    rows_reset: int


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One entry of the event feed. ``sequence`` is assigned by the store (0 before)."""

    operation_id: UUID
    operation_name: str
    type: EventType
    severity: Severity
    message: str
    timestamp: datetime
    sequence: int = 0
    tenant: str | None = None  # the operation's tenant: scoped feeds show only their own
    # Who caused it: a principal's name, "anonymous" (a request with no authentication),
    # or "system" (the service by itself).
    actor: str = "system"


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One notification in the outbox: an event of an operation for one recipient.

    ``payload`` is the body the channel sends (``{event, operation, occurredAt}``), fixed
    when the delivery is stored so a retry sends the same thing.
    """

    id: UUID
    operation_id: UUID
    channel: str
    target: str
    trigger: str
    event: str
    payload: dict[str, Any]
    created_at: datetime
    state: DeliveryState = DeliveryState.PENDING
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    claimed_by: str | None = None
    claimed_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class ProgressDelta:
    """Counter increments that travel with a batch of row records."""

    processed: int = 0
    successful: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing."""

    items: Sequence[T]
    total_count: int
    page: int
    page_size: int
    next_after: int | None = None  # keyset cursor of the next page (row listings)
    keyset: bool = False  # found by cursor, not by page number

    @property
    def has_next_page(self) -> bool:
        """True when items exist beyond this page."""
        if self.keyset:
            return self.next_after is not None
        return self.page * self.page_size < self.total_count


@dataclass(frozen=True, slots=True)
class OperationQuery:
    """Filters and paging for listing operations (newest first, then by id)."""

    page: int = 1
    page_size: int = 25
    operation_name: str | None = None
    status: OperationStatus | None = None
    created_by: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    tenant: str | None = None  # only this tenant's operations (None: every operation)
    file_sha256: str | None = None  # only operations whose stored file has this hash


@dataclass(frozen=True, slots=True)
class ActiveLimit:
    """At most ``most`` operations Pending, Running or Retrying per tenant: those with the
    new operation's ``tenant`` when it has one, else those of its creator without one."""

    most: int


@dataclass(frozen=True, slots=True)
class LimitReached:
    """An add refused by its ``ActiveLimit``: how many operations were active."""

    active: int


@dataclass(frozen=True, slots=True)
class RowQuery:
    """Filters and paging for listing row records of one operation (by row number)."""

    operation_id: UUID
    page: int = 1
    page_size: int = 25
    failed_only: bool = False
    state: RowState | None = None
    error_type: ErrorType | None = None
    row_number: int | None = None
    step_name: str | None = None
    after: int | None = None  # keyset paging: rows numbered above this, ignoring ``page``

    @property
    def filtered(self) -> bool:
        """Whether anything beyond the operation narrows the rows."""
        return (
            self.failed_only
            or self.state is not None
            or self.error_type is not None
            or self.row_number is not None
            or self.step_name is not None
        )


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file kept by a file store."""

    file_id: str
    size: int


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    """An ``Idempotency-Key`` of a create: the principal's key, a fingerprint of what was
    submitted, and the creation time before which an earlier use has expired."""

    principal: str
    key: str
    fingerprint: str
    expires_before: datetime


@dataclass(frozen=True, slots=True)
class KeyInUse:
    """The unexpired earlier use of an idempotency key: the operation it created and the
    fingerprint of that submission."""

    operation_id: UUID
    fingerprint: str


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One row range of an operation split for several workers: ``row_count`` rows from
    ``first_row``, whose first record starts at byte ``offset`` of the stored file (-1 when
    unknown: the range is then found by reading from the start)."""

    operation_id: UUID
    index: int
    first_row: int
    row_count: int
    offset: int
    state: ChunkState = ChunkState.PENDING
    worker_id: str | None = None
    heartbeat_at: datetime | None = None
    version: int = 0
    resume_count: int = 0  # claims of it after its holder stopped responding

    @property
    def last_row(self) -> int:
        """The number of the range's last row."""
        return self.first_row + self.row_count - 1


class CompletedSpan(NamedTuple):
    """A span (see ``spans``) as it is stored: consecutive rows ``first`` to ``last`` that
    completed at their one step with nothing else to record, stored exactly as plain
    Completed row records, without building them. ``step_index`` is -1 for rows a dry run
    validated (step ``validation``)."""

    first: int
    last: int
    step_name: str | None
    completed_at: datetime
    step_index: int = 0


@dataclass(frozen=True, slots=True)
class Fence:
    """Who may write an operation's rows: the worker holding the operation, or (with
    ``chunk``) the worker holding that chunk of it."""

    worker_id: str
    chunk: int | None = None


@dataclass(frozen=True, slots=True)
class RowWrite:
    """One run's finished rows, as ``RowStore.save`` takes them: its row records, the
    counter increments, its events, its fence and its spans of plain completions."""

    operation_id: UUID
    rows: Sequence[RowRecord]
    delta: ProgressDelta
    events: Sequence[EventRecord] = ()
    fence: Fence | None = None
    completed: Sequence[CompletedSpan] = ()

    def check(self) -> None:
        """Raise ValueError when a row belongs to another operation."""
        if any(row.operation_id != self.operation_id for row in self.rows):
            raise ValueError(f"every saved row must belong to operation {self.operation_id}")


@dataclass(frozen=True, slots=True)
class UndoRefused:
    """An ``add_undo`` that inserted nothing: the operation to undo as stored (already
    undone, or not in a final status), or None when it is unknown."""

    original: OperationRecord | None


@dataclass(frozen=True, slots=True)
class SavedMapping:
    """A column map kept under a name for one operation and tenant (None: principals
    without a tenant)."""

    tenant: str | None
    operation_name: str
    name: str
    column_map: dict[str, str]
    updated_at: datetime
