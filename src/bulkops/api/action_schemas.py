"""Wire schemas of bulk actions (``/api/actions``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field, StrictBool, field_validator

from bulkops.api.deps import IsoDateTime
from bulkops.api.schemas import Schema
from bulkops.service.actions import ActionDetail, ActionFilter, ActionRequest
from bulkops.storage.actions import ActionItem, ActionKind, ActionRecord
from bulkops.storage.states import OperationStatus


def _aware(value: datetime | None) -> datetime | None:
    # An instant without an offset is read as UTC, as the list filters read it.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class ActionFilterSchema(Schema):
    """Which operations an action matches; every condition given must hold, and at least
    one must be given."""

    ids: list[UUID] | None = Field(default=None, max_length=10_000)
    operation_name: str | None = None
    status: list[OperationStatus] | None = None
    created_by: str | None = None
    from_: IsoDateTime | None = Field(default=None, alias="from")
    to: IsoDateTime | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def to_filter(self) -> ActionFilter:
        """The service's filter."""
        return ActionFilter(
            ids=tuple(self.ids) if self.ids else None,
            operation_name=self.operation_name or None,
            statuses=tuple(self.status) if self.status else None,
            created_by=self.created_by or None,
            created_from=_aware(self.from_),
            created_to=_aware(self.to),
        )


class ActionRequestSchema(Schema):
    """Body of ``POST /api/actions``."""

    action: Literal["retry", "cancel", "restart"]
    filter: ActionFilterSchema
    from_step: str | None = Field(default=None, min_length=1)
    include_completed: StrictBool = False
    reason: str | None = Field(default=None, max_length=2000)
    preview: StrictBool = False

    def to_request(self) -> ActionRequest:
        """The service's request."""
        return ActionRequest(
            action=ActionKind(self.action),
            filter=self.filter.to_filter(),
            from_step=self.from_step,
            include_completed=self.include_completed,
            reason=self.reason,
        )


class ActionPreviewSchema(Schema):
    """What an action would act on (``preview: true``): how many operations, and the
    first 25."""

    matched: int
    operation_ids: list[UUID]


class ActionSchema(Schema):
    """A bulk action and its progress (``done + skipped + failed`` of ``matched``)."""

    id: UUID
    action: str
    filter: dict[str, Any]
    from_step: str | None = None
    include_completed: bool
    reason: str | None = None
    status: str
    matched: int
    done: int
    skipped: int
    failed: int
    created_by: str
    created_at: datetime
    completed_at: datetime | None = None

    @classmethod
    def of(cls, record: ActionRecord) -> ActionSchema:
        """Map a stored action."""
        return cls(
            id=record.id,
            action=record.action.value,
            filter=record.filter,
            from_step=record.from_step,
            include_completed=record.include_completed,
            reason=record.reason,
            status=record.status.value,
            matched=record.matched,
            done=record.done,
            skipped=record.skipped,
            failed=record.failed,
            created_by=record.created_by,
            created_at=record.created_at,
            completed_at=record.completed_at,
        )


class ActionItemSchema(Schema):
    """An operation the action skipped or failed on, with the reason."""

    operation_id: UUID
    outcome: str
    reason: str | None = None

    @classmethod
    def of(cls, item: ActionItem) -> ActionItemSchema:
        """Map a stored item."""
        return cls(operation_id=item.operation_id, outcome=item.outcome.value, reason=item.reason)


class ActionDetailSchema(ActionSchema):
    """An action with the operations it skipped or failed on (``GET /api/actions/{id}``)."""

    items: list[ActionItemSchema]

    @classmethod
    def of_detail(cls, detail: ActionDetail) -> ActionDetailSchema:
        """Map an action and its items."""
        base = ActionSchema.of(detail.record).model_dump()
        return cls(**base, items=[ActionItemSchema.of(item) for item in detail.items])
