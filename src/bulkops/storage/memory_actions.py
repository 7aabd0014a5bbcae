"""Bulk actions in memory (tests and single-process use): ``ActionStore`` without a
database; every method runs without awaiting, so each is atomic in its event loop."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from bulkops.storage.actions import ActionItem, ActionRecord, ActionStatus, Outcome
from bulkops.storage.records import Page

if TYPE_CHECKING:
    from bulkops.storage.ports import ActionStore

_COUNTERS = {Outcome.DONE: "done", Outcome.SKIPPED: "skipped", Outcome.FAILED: "failed"}


class MemoryActionStore:
    """Actions and their items in dicts."""

    def __init__(self) -> None:
        self._actions: dict[UUID, ActionRecord] = {}
        self._items: dict[UUID, list[ActionItem]] = {}

    async def add_action(self, record: ActionRecord, operation_ids: Sequence[UUID]) -> None:
        """Insert the action and its pending items."""
        self._actions[record.id] = record
        self._items[record.id] = [
            ActionItem(record.id, position, operation_id)
            for position, operation_id in enumerate(operation_ids)
        ]

    async def get_action(self, action_id: UUID) -> ActionRecord | None:
        """The action, or None."""
        return self._actions.get(action_id)

    async def list_actions(
        self, *, tenant: str | None, scoped: bool, page: int, page_size: int
    ) -> Page[ActionRecord]:
        """A page of actions, newest first."""
        if page < 1 or page_size < 1:
            raise ValueError("page and page_size must be at least 1")
        found = [a for a in self._actions.values() if not scoped or a.tenant == tenant]
        found.sort(key=lambda a: (a.created_at, str(a.id)), reverse=True)
        start = (page - 1) * page_size
        return Page(found[start : start + page_size], len(found), page, page_size)

    async def action_items(
        self, action_id: UUID, outcomes: Collection[Outcome], limit: int
    ) -> Sequence[ActionItem]:
        """Items of the action with one of ``outcomes``, by position."""
        wanted = set(outcomes)
        items = [i for i in self._items.get(action_id, []) if i.outcome in wanted]
        return items[:limit]

    async def claim_action(
        self, runner: str, now: datetime, stale_before: datetime
    ) -> ActionRecord | None:
        """Take the oldest Running action nobody holds (or whose runner went quiet)."""
        free = [
            a
            for a in self._actions.values()
            if a.status is ActionStatus.RUNNING
            and (
                a.runner in (None, runner)
                or a.heartbeat_at is None
                or a.heartbeat_at < stale_before
            )
        ]
        if not free:
            return None
        first = min(free, key=lambda a: (a.created_at, str(a.id)))
        claimed = replace(first, runner=runner, heartbeat_at=now)
        self._actions[first.id] = claimed
        return claimed

    def _held(self, action_id: UUID, runner: str) -> ActionRecord | None:
        action = self._actions.get(action_id)
        if action is None or action.status is not ActionStatus.RUNNING or action.runner != runner:
            return None
        return action

    async def record_item(
        self,
        action_id: UUID,
        position: int,
        outcome: Outcome,
        reason: str | None,
        runner: str,
        now: datetime,
    ) -> bool:
        """Record a pending item's outcome while ``runner`` holds the action."""
        action = self._held(action_id, runner)
        items = self._items.get(action_id, [])
        if action is None or not 0 <= position < len(items) or outcome is Outcome.PENDING:
            return False
        item = items[position]
        if item.outcome is not Outcome.PENDING:
            return False
        items[position] = replace(item, outcome=outcome, reason=reason)
        counter = _COUNTERS[outcome]
        self._actions[action_id] = replace(
            action, heartbeat_at=now, **{counter: getattr(action, counter) + 1}
        )
        return True

    async def heartbeat_action(self, action_id: UUID, runner: str, now: datetime) -> bool:
        """Renew the heartbeat of a held action."""
        action = self._held(action_id, runner)
        if action is None:
            return False
        self._actions[action_id] = replace(action, heartbeat_at=now)
        return True

    async def end_action(
        self, action_id: UUID, status: ActionStatus, now: datetime, runner: str | None = None
    ) -> ActionRecord | None:
        """End a Running action (held by ``runner``, when given)."""
        action = self._actions.get(action_id)
        if action is None or action.status is not ActionStatus.RUNNING:
            return None
        if runner is not None and action.runner != runner:
            return None
        ended = replace(action, status=status, completed_at=now, runner=None, heartbeat_at=None)
        self._actions[action_id] = ended
        return ended


if TYPE_CHECKING:

    def _implements_port(store: MemoryActionStore) -> ActionStore:
        # mypy proves here that the memory store satisfies the Protocol.
        return store
