"""Wire schemas: camelCase JSON, null fields omitted. Mappers from stored records live here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Self, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from bulkops.definition.operation import PROCESS_STEP, OperationDefinition
from bulkops.service.signals import SignalResult
from bulkops.storage.records import (
    Page,
    RowRecord,
    StepState,
)
from bulkops.storage.states import ErrorType, OperationStatus, RowState

ItemT = TypeVar("ItemT")
_ABSENT = object()

# "Has a character that is not whitespace", where whitespace is exactly what Python's
# str.strip() removes (which is more than JSON Schema's \s), so the schema says what the
# service checks.
NON_BLANK = "[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


class Schema(BaseModel):
    """Base of every wire schema."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)

    @classmethod
    def from_record(cls, source: object) -> Self:
        """Map a stored record, view or descriptor whose attributes carry the same names."""
        # The fields' values gathered here, then validated as a mapping: pydantic reads
        # an object's attributes about twice as slowly (a list page maps 20 records).
        values = {}
        for name in cls.model_fields:
            value = getattr(source, name, _ABSENT)
            if value is not _ABSENT:
                values[name] = value
        return cls.model_validate(values, from_attributes=True)


class ErrorBody(Schema):
    """The body of every 4xx and 5xx answer."""

    error: str
    reason: str | None = None


class HealthCheckSchema(Schema):
    """The outcome of one readiness check."""

    status: str
    error: str | None = None


class HealthSchema(Schema):
    """A liveness or readiness answer: ``Healthy`` or ``Unhealthy`` and the checks run."""

    status: str
    checks: dict[str, HealthCheckSchema] | None = None


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries: each status code answers with the error body."""
    return {code: {"model": ErrorBody} for code in codes}


class FieldSchema(Schema):
    """A metadata field or file column."""

    name: str
    type: str
    required: bool


class OperationDescriptor(Schema):
    """One registered operation (GET /api/operations)."""

    name: str
    description: str
    is_step_based: bool
    metadata_fields: list[FieldSchema]
    file_columns: list[FieldSchema]
    steps: list[str]
    is_batch: bool = False
    batch_size: int | None = None
    tolerated_failure_count: int | None = None
    tolerated_failure_percentage: float | None = None
    rate_limit: str | None = None
    step_rate_limits: dict[str, str] | None = None
    csv_delimiter: str | None = None
    schema_version: str | None = None
    undoable: bool | None = None  # shown (true) only when the operation defines an undo

    @classmethod
    def of(cls, definition: OperationDefinition) -> OperationDescriptor:
        """Map a definition."""
        controls = definition.controls
        step_limits = {s.name: s.rate_limit.text for s in definition.steps if s.rate_limit}
        return cls(
            name=definition.name,
            description=definition.description,
            is_step_based=definition.is_step_based,
            metadata_fields=[FieldSchema.from_record(f) for f in definition.metadata_fields],
            file_columns=[FieldSchema.from_record(f) for f in definition.file_columns],
            steps=[step.name for step in definition.steps],
            is_batch=definition.is_batch,
            batch_size=controls.batch_size,
            tolerated_failure_count=controls.tolerated_failure_count,
            tolerated_failure_percentage=controls.tolerated_failure_percentage,
            rate_limit=controls.rate_limit.text if controls.rate_limit else None,
            step_rate_limits=step_limits or None,
            csv_delimiter=controls.csv_delimiter,
            schema_version=controls.schema_version,
            undoable=True if definition.undoable else None,
        )


class CreateResult(Schema):
    """Answer of a successful create."""

    operation_id: UUID


class ValidationResultSchema(Schema):
    """Answer of validate (and of a create whose metadata is invalid)."""

    valid: bool
    metadata_errors: list[str]
    file_errors: list[str]
    suggested_column_map: dict[str, str] | None = None
    duplicate_of: UUID | None = None


class OperationSchema(Schema):
    """An operation record (detail and list items)."""

    id: UUID
    operation_name: str
    status: OperationStatus
    created_by: str
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    total_rows: int
    processed_rows: int
    successful_rows: int
    error_count: int
    retry_count: int
    source: str
    file_id: str
    file_name: str
    file_size: int
    metadata: dict[str, Any]
    error_message: str | None = None
    column_map: dict[str, str] | None = None
    schema_version: str | None = None
    tenant: str | None = None
    # Omitted unless true, like the null fields.
    dry_run: bool | None = None
    source_operation_id: UUID | None = None
    priority: int = 0
    # The operation this one undoes; the operation that undoes this one.
    undo_of: UUID | None = None
    undone_by: UUID | None = None
    file_sha256: str | None = None

    @classmethod
    def from_record(cls, source: object) -> Self:
        """Map a stored operation record (``dryRun`` shown only when true)."""
        schema = super().from_record(source)
        if not schema.dry_run:
            schema.dry_run = None
        return schema


class CallerSchema(Schema):
    """Who is calling (GET /api/me)."""

    name: str | None = None
    tenant: str | None = None


class StatusSchema(Schema):
    """Status and progress."""

    status: OperationStatus
    processed_rows: int
    total_rows: int
    error_count: int
    completed_at: datetime | None = None
    progress: int


class RowErrorSchema(Schema):
    """A failed row (GET /errors)."""

    row_number: int
    row_id: str | None = None
    step_index: int
    step_name: str | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    state: RowState
    retry_attempt: int
    signal_key: str | None = None
    row_data: dict[str, Any] | None = None
    fixed: bool | None = None  # true once its data was fixed in place (omitted otherwise)
    # Its data before its first fix, once that differs from ``rowData`` (omitted otherwise).
    original_row_data: dict[str, Any] | None = None
    unchanged: bool | None = None  # a fix's answer: its data was the row's already

    @classmethod
    def of(
        cls, row: RowRecord, fixed: bool = False, original: dict[str, Any] | None = None
    ) -> RowErrorSchema:
        """Map a row record; ``fixed``: its data was fixed in place; ``original``: its data
        before the first fix (shown when it differs from the row's data)."""
        schema = cls.from_record(row)
        schema.fixed = True if fixed else None
        if original is not None and original != row.row_data:
            schema.original_row_data = original
        return schema


class FixRowRequest(Schema):
    """Body of a fix in place: the row's file columns by their file names (the whole row)."""

    row_data: dict[str, Any]


class FixRowErrorSchema(Schema):
    """A fix refused for its data: one message per problem."""

    error: str
    errors: list[str]


class StepSchema(Schema):
    """Progress of one step of one row."""

    name: str
    index: int
    state: RowState
    attempts: int
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    signal_key: str | None = None


def _row_steps(row: RowRecord, definition: OperationDefinition | None) -> list[StepState]:
    if row.steps and (definition is None or definition.is_step_based):
        return row.steps  # a row operation's one stored step only counts its restarts
    if definition is not None and definition.is_step_based and row.step_index < 0:
        # A pipeline row a dry run validated (stored without steps): none of them ran.
        return [StepState(step.name, step.index) for step in definition.steps]
    # Row-based operations store no per-step list: their one step is derived from the row.
    reached = row.step_index >= 0 and row.state is not RowState.PENDING
    name = definition.steps[0].name if definition else PROCESS_STEP
    return [
        StepState(
            name=name,
            index=0,
            state=row.state if reached else RowState.PENDING,
            attempts=1 if reached and row.state.is_final else 0,
            completed_at=row.completed_at if reached and row.state.is_final else None,
            error_type=row.error_type if reached else None,
            error_message=row.error_message if reached else None,
        )
    ]


class RowProgressSchema(Schema):
    """Per-row pipeline progress (GET /rows)."""

    row_number: int
    row_id: str | None = None
    state: RowState
    current_step: str | None = None
    step_index: int
    completed_steps: int
    total_steps: int
    retry_attempt: int
    signal_key: str | None = None
    steps: list[StepSchema]
    fixed: bool | None = None  # true once its data was fixed in place (omitted otherwise)

    @classmethod
    def of(
        cls, row: RowRecord, definition: OperationDefinition | None, fixed: bool = False
    ) -> RowProgressSchema:
        """Map a row record; ``definition`` names the steps of row-based operations,
        ``fixed``: its data was fixed in place."""
        steps = _row_steps(row, definition)
        return cls(
            fixed=True if fixed else None,
            row_number=row.row_number,
            row_id=row.row_id,
            state=row.state,
            current_step=row.step_name,
            step_index=row.step_index,
            completed_steps=sum(1 for s in steps if s.state is RowState.COMPLETED),
            total_steps=len(steps),
            retry_attempt=row.retry_attempt,
            signal_key=row.signal_key,
            steps=[StepSchema.from_record(s) for s in steps],
        )


class EventSchema(Schema):
    """One feed event."""

    sequence: int
    operation_id: UUID
    operation_name: str
    type: str
    severity: str
    message: str
    timestamp: datetime
    actor: str = "system"  # who caused it: a principal's name, "anonymous" or "system"


class DeliverySchema(Schema):
    """One notification delivery and how it went (GET /notifications)."""

    id: UUID
    channel: str
    target: str
    trigger: str
    event: str
    state: str
    attempts: int
    created_at: datetime
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = None

    @classmethod
    def from_record(cls, record: Any) -> DeliverySchema:
        """The API view of a stored delivery."""
        return cls(
            id=record.id,
            channel=record.channel,
            target=record.target,
            trigger=record.trigger,
            event=record.event,
            state=record.state.value,
            attempts=record.attempts,
            created_at=record.created_at,
            next_attempt_at=record.next_attempt_at,
            delivered_at=record.delivered_at,
            last_status_code=record.last_status_code,
            last_error=record.last_error,
        )


class PageSchema(Schema, Generic[ItemT]):
    """The paged envelope."""

    items: list[ItemT]
    total_count: int
    page: int
    page_size: int
    has_next_page: bool

    @classmethod
    def build(cls, page: Page[Any], items: list[ItemT]) -> PageSchema[ItemT]:
        """Wrap mapped items with the paging fields of ``page``."""
        return cls(
            items=items,
            total_count=page.total_count,
            page=page.page,
            page_size=page.page_size,
            has_next_page=page.has_next_page,
        )


class RowPageSchema(PageSchema[ItemT], Generic[ItemT]):
    """A page of row records; ``nextAfter`` is the keyset cursor of the next page."""

    next_after: int | None = Field(
        default=None,
        description="Pass as `after` for the next page (absent on the last page)",
    )

    @classmethod
    def of_rows(cls, page: Page[Any], items: list[ItemT]) -> RowPageSchema[ItemT]:
        """Wrap mapped row items with the paging fields and cursor of ``page``."""
        return cls(
            items=items,
            total_count=page.total_count,
            page=page.page,
            page_size=page.page_size,
            has_next_page=page.has_next_page,
            next_after=page.next_after,
        )


class SignalFailureRequest(Schema):
    """Body of a failure signal."""

    error_message: str = Field(min_length=1, pattern=NON_BLANK)


class SignalResultSchema(Schema):
    """What a signal did to the row that was waiting."""

    row_number: int
    step_index: int
    step_name: str | None = None
    completed: bool
    failed: bool
    cross_process: bool

    @classmethod
    def of(cls, result: SignalResult) -> SignalResultSchema:
        """Map a signal result."""
        return cls(
            row_number=result.row.row_number,
            step_index=result.row.step_index,
            step_name=result.row.step_name,
            completed=result.completed,
            failed=result.failed,
            cross_process=result.cross_process,
        )


class EligibilitySchema(Schema):
    """Whether an operation may be retried now."""

    is_eligible: bool
    reason: str | None = None


class RetryRowsRequest(Schema):
    """Body of a selected-rows retry (an empty list is refused: it is not "every row")."""

    row_numbers: list[Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]] = Field(min_length=1)
    from_step: str | None = Field(default=None, min_length=1)  # restart from this step
    include_completed: bool = False  # Completed rows too (a restart)


class RetryRequest(Schema):
    """Optional body of a retry of every failed row: a restart from a step."""

    from_step: str | None = Field(default=None, min_length=1)  # a step of a pipeline
    include_completed: bool = False  # Completed rows (and a Completed operation) too


class RetryResultSchema(Schema):
    """What a retry request did."""

    rows_submitted: int
    rows_skipped: int
    skipped_reasons: list[str] | None = None


class RetryHistorySchema(Schema):
    """One error snapshot taken when a retry reset a row."""

    row_number: int
    attempt: int
    step_index: int
    step_name: str | None = None
    error_type: ErrorType | None = None
    error_message: str | None = None
    failed_at: datetime | None = None
