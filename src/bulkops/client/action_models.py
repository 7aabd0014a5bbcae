"""Models of bulk actions as the client reads them (``/api/actions``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from bulkops.client.models import Model

__all__ = ["Action", "ActionDetail", "ActionItem", "ActionPreview"]


class ActionPreview(Model):
    """What an action would act on: how many operations, and the first 25."""

    matched: int
    operation_ids: list[UUID]


class Action(Model):
    """A bulk action and its progress (``done + skipped + failed`` of ``matched``)."""

    id: UUID
    action: str
    filter: dict[str, Any]
    from_step: str | None = None
    include_completed: bool = False
    reason: str | None = None
    status: str
    matched: int
    done: int = 0
    skipped: int = 0
    failed: int = 0
    created_by: str
    created_at: datetime
    completed_at: datetime | None = None

    @property
    def finished(self) -> bool:
        """Whether it ended (Completed or Cancelled)."""
        return self.status != "Running"


class ActionItem(Model):
    """An operation the action skipped or failed on, with the reason."""

    operation_id: UUID
    outcome: str
    reason: str | None = None


class ActionDetail(Action):
    """An action with the operations it skipped or failed on."""

    items: list[ActionItem] = Field(default_factory=list)
