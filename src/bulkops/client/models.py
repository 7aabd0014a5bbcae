"""Typed answers of the API: snake_case attributes over the API's camelCase JSON.

Fields a newer server (or a gateway: ``sourceService``) adds are kept, not refused, and
fields an older server does not send yet take their defaults.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from bulkops.wire import ErrorType, OperationStatus, RowState

T = TypeVar("T")


class Model(BaseModel):
    """An API object: camelCase on the wire, snake_case here, unknown fields kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class FieldDescriptor(Model):
    """A metadata field of an operation."""

    name: str
    type: str
    required: bool


class OperationDescriptor(Model):
    """A registered operation (``GET /api/operations``)."""

    name: str
    description: str | None = None
    is_step_based: bool = False
    metadata_fields: list[FieldDescriptor] = []
    file_columns: list[FieldDescriptor] = []
    steps: list[str] = []
    is_batch: bool | None = None
    batch_size: int | None = None
    tolerated_failure_count: int | None = None
    tolerated_failure_percentage: float | None = None
    rate_limit: str | None = None
    csv_delimiter: str | None = None
    schema_version: str | None = None
    undoable: bool = False  # the operation defines an undo (``POST /api/bulks/{id}/undo``)
    source_service: str | None = None


class Operation(Model):
    """One operation (detail, and the items of the list)."""

    id: UUID
    operation_name: str
    status: OperationStatus
    created_by: str
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    total_rows: int = 0
    processed_rows: int = 0
    successful_rows: int = 0
    error_count: int = 0
    retry_count: int = 0
    source: str | None = None
    file_id: str | None = None
    file_name: str | None = None
    file_size: int | None = None
    metadata: dict[str, Any] = {}
    error_message: str | None = None
    column_map: dict[str, str] | None = None
    schema_version: str | None = None
    priority: int = 0
    tenant: str | None = None  # the creator's tenant; absent for unscoped creators
    dry_run: bool = False
    source_operation_id: UUID | None = None
    undo_of: UUID | None = None  # the operation this one undoes
    undone_by: UUID | None = None  # the operation that undoes this one
    file_sha256: str | None = None  # absent for operations stored before hashes were kept


class StatusView(Model):
    """Status and progress (``GET /api/bulks/{id}/status``)."""

    status: OperationStatus
    processed_rows: int
    total_rows: int
    error_count: int
    completed_at: datetime | None = None
    progress: int = 0

    @property
    def finished(self) -> bool:
        """The status is final: Completed, CompletedWithErrors, Failed or Cancelled."""
        return self.status.is_terminal


class RowError(Model):
    """A failed row (``GET /api/bulks/{id}/errors``, and the answer of a fix); ``fixed``:
    its data was corrected in place and the next retry uses it."""

    row_number: int
    row_id: str | None = None
    step_index: int
    step_name: str | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    state: RowState
    retry_attempt: int = 0
    signal_key: str | None = None
    row_data: dict[str, Any] | None = None
    fixed: bool = False
    original_row_data: dict[str, Any] | None = None  # its data before the first fix
    # The answer of a fix: the data sent was the row's already, so nothing changed.
    unchanged: bool = False


class StepProgress(Model):
    """One step of a row."""

    name: str
    index: int
    state: RowState
    attempts: int = 0
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    signal_key: str | None = None


class RowProgress(Model):
    """A row with the state of every step (``GET /api/bulks/{id}/rows``)."""

    row_number: int
    row_id: str | None = None
    state: RowState
    current_step: str | None = None
    step_index: int = 0
    completed_steps: int = 0
    total_steps: int = 0
    retry_attempt: int = 0
    signal_key: str | None = None
    steps: list[StepProgress] = []
    fixed: bool = False


class Page(Model, Generic[T]):
    """A page of a listing; ``next_after`` is the keyset cursor of row listings."""

    items: list[T]
    total_count: int
    page: int
    page_size: int
    has_next_page: bool
    next_after: int | None = None


class Event(Model):
    """An entry of the event feed."""

    sequence: int
    operation_id: UUID
    operation_name: str
    type: str
    severity: str
    message: str
    timestamp: datetime
    actor: str = "system"  # who caused it: a principal's name, "anonymous" or "system"


class CreateResult(Model):
    """The answer of a create."""

    operation_id: UUID


class ValidationResult(Model):
    """The answer of a validate."""

    valid: bool
    metadata_errors: list[str] = []
    file_errors: list[str] = []
    suggested_column_map: dict[str, str] | None = None
    # The newest operation of the same name (and tenant) whose file had this file's hash.
    duplicate_of: UUID | None = None


class RetryEligibility(Model):
    """Whether an operation can be retried, and why not."""

    is_eligible: bool
    reason: str | None = None


class UndoPreview(Model):
    """What an undo would do: the rows, and their row-steps to undo."""

    rows: int
    steps: int


class RetryResult(Model):
    """What a retry submitted."""

    rows_submitted: int
    rows_skipped: int
    skipped_reasons: list[str] | dict[str, Any] | None = None


class RetryHistoryItem(Model):
    """A retried row's earlier failure."""

    row_number: int
    attempt: int
    step_index: int
    step_name: str | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    failed_at: datetime | None = None


class SignalResult(Model):
    """What a signal did."""

    row_number: int
    step_index: int
    step_name: str | None = None
    completed: bool
    failed: bool
    cross_process: bool = False


class Health(Model):
    """Liveness or readiness."""

    status: str
    checks: dict[str, Any] | None = None


class SavedMapping(Model):
    """A column mapping saved under a name for an operation (file column -> row column)."""

    name: str
    column_map: dict[str, str]


class UsageDay(Model):
    """One tenant's use on one UTC day (``GET /api/usage``)."""

    tenant: str | None = None
    day: date
    operations_created: int
    rows_submitted: int
    rows_processed: int
    bytes_stored: int


class Usage(Model):
    """Use by tenant and day over the last ``days`` days, newest day first."""

    days: int
    items: list[UsageDay]
