"""Bulk actions as they are stored: the action, and one item per operation it matched.

An action (retry, cancel or restart of every operation a filter matched) is written with
its items when it is created, each item ``pending``; a runner claims the action, acts on
its pending items in order and records each outcome. The act itself stamps the
operation's ``last_action_id`` in the act's transaction, so a runner that resumes an
action after a crash finds which pending items were acted on already and acts on each
operation exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

__all__ = ["ActionItem", "ActionKind", "ActionRecord", "ActionStatus", "Outcome"]


class ActionKind(StrEnum):
    """What an action does to each operation it matched."""

    RETRY = "retry"
    CANCEL = "cancel"
    RESTART = "restart"


class ActionStatus(StrEnum):
    """Where an action stands."""

    RUNNING = "Running"  # items are pending (a runner holds it, or one will claim it)
    COMPLETED = "Completed"  # every item has its outcome
    CANCELLED = "Cancelled"  # stopped by a user; the pending items stay pending


class Outcome(StrEnum):
    """What became of one matched operation."""

    PENDING = "pending"
    DONE = "done"
    SKIPPED = "skipped"  # it could not take the action (the reason says why)
    FAILED = "failed"  # acting on it went wrong (the reason says how)


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One bulk action and its counts (``done + skipped + failed <= matched``)."""

    id: UUID
    action: ActionKind
    filter: dict[str, Any]  # as the request gave it (wire names)
    status: ActionStatus
    matched: int
    created_by: str
    created_at: datetime
    tenant: str | None = None
    from_step: str | None = None
    include_completed: bool = False
    reason: str | None = None
    done: int = 0
    skipped: int = 0
    failed: int = 0
    completed_at: datetime | None = None
    runner: str | None = None  # the process acting on it now
    heartbeat_at: datetime | None = None  # when that runner last said it is alive


@dataclass(frozen=True, slots=True)
class ActionItem:
    """One operation an action matched, in the order it is acted on."""

    action_id: UUID
    position: int
    operation_id: UUID
    outcome: Outcome = Outcome.PENDING
    reason: str | None = None
