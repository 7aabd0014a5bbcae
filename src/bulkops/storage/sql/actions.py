"""ActionStore on SQL: bulk actions and their items in ``bulk_actions`` and
``bulk_action_items``. A claim and each recorded outcome are compare-and-set updates, so
two runners never both hold an action nor both record one item."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import RowMapping, func, or_, select, update

from bulkops.storage.actions import ActionItem, ActionKind, ActionRecord, ActionStatus, Outcome
from bulkops.storage.records import Page
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.pages import check_paging
from bulkops.storage.sql.schema import bulk_action_items, bulk_actions

_a = bulk_actions.c
_i = bulk_action_items.c
_FIELDS = tuple(column.name for column in bulk_actions.columns)
_COUNTERS = {Outcome.DONE: _a.done, Outcome.SKIPPED: _a.skipped, Outcome.FAILED: _a.failed}
_INSERT_BATCH = 1_000
_RUNNING = ActionStatus.RUNNING.value


class _Lost(Exception):
    """Rolls back a transaction whose compare-and-set found nothing to change."""


def _record(row: RowMapping) -> ActionRecord:
    values: dict[str, Any] = {name: row[name] for name in _FIELDS}
    values["action"] = ActionKind(values["action"])
    values["status"] = ActionStatus(values["status"])
    return ActionRecord(**values)


def _values(record: ActionRecord) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in _FIELDS}
    values["action"], values["status"] = record.action.value, record.status.value
    return values


class SqlActionStore:
    """Bulk actions in SQLite or PostgreSQL.

    Args:
        database: the shared engine wrapper (see ``Database.from_url``).
    """

    def __init__(self, database: Database) -> None:
        self._db = database

    async def add_action(self, record: ActionRecord, operation_ids: Sequence[UUID]) -> None:
        """Insert the action and its pending items in one transaction."""
        items = [
            {
                "action_id": record.id,
                "position": position,
                "operation_id": operation_id,
                "outcome": Outcome.PENDING.value,
                "reason": None,
            }
            for position, operation_id in enumerate(operation_ids)
        ]
        async with self._db.write() as conn:
            await conn.execute(bulk_actions.insert().values(**_values(record)))
            for start in range(0, len(items), _INSERT_BATCH):
                await conn.execute(bulk_action_items.insert(), items[start : start + _INSERT_BATCH])

    async def get_action(self, action_id: UUID) -> ActionRecord | None:
        """The action, or None."""
        async with self._db.read() as conn:
            found = (
                (await conn.execute(select(bulk_actions).where(_a.id == action_id)))
                .mappings()
                .one_or_none()
            )
        return None if found is None else _record(found)

    async def list_actions(
        self, *, tenant: str | None, scoped: bool, page: int, page_size: int
    ) -> Page[ActionRecord]:
        """A page of actions, newest first (then by id)."""
        check_paging(page, page_size)
        conditions = [_a.tenant == tenant] if scoped and tenant is not None else []
        if scoped and tenant is None:
            conditions = [_a.tenant.is_(None)]
        count = select(func.count()).select_from(bulk_actions).where(*conditions)
        stmt = (
            select(bulk_actions)
            .where(*conditions)
            .order_by(_a.created_at.desc(), _a.id)
            .limit(page_size)
            .offset((page - 1) * page_size)
        )
        async with self._db.read() as conn:
            total = (await conn.execute(count)).scalar_one()
            rows = (await conn.execute(stmt)).mappings().all()
        return Page([_record(row) for row in rows], int(total), page, page_size)

    async def action_items(
        self, action_id: UUID, outcomes: Collection[Outcome], limit: int
    ) -> Sequence[ActionItem]:
        """Up to ``limit`` items with one of ``outcomes``, by position."""
        wanted = [outcome.value for outcome in outcomes]
        stmt = (
            select(bulk_action_items)
            .where(_i.action_id == action_id, _i.outcome.in_(wanted))
            .order_by(_i.position)
            .limit(limit)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [
            ActionItem(
                action_id=row["action_id"],
                position=row["position"],
                operation_id=row["operation_id"],
                outcome=Outcome(row["outcome"]),
                reason=row["reason"],
            )
            for row in rows
        ]

    async def claim_action(
        self, runner: str, now: datetime, stale_before: datetime
    ) -> ActionRecord | None:
        """Take the oldest free Running action: a compare-and-set on its holder."""
        free = (
            _a.status == _RUNNING,
            or_(
                _a.runner.is_(None),
                _a.runner == runner,  # its own, left after a storage failure
                _a.heartbeat_at.is_(None),
                _a.heartbeat_at < stale_before,
            ),
        )
        candidates = select(_a.id).where(*free).order_by(_a.created_at, _a.id).limit(5)
        async with self._db.write() as conn:
            for (action_id,) in (await conn.execute(candidates)).all():
                taken = await conn.execute(
                    update(bulk_actions)
                    .where(_a.id == action_id, *free)
                    .values(runner=runner, heartbeat_at=now)
                )
                if taken.rowcount == 1:
                    found = (
                        (await conn.execute(select(bulk_actions).where(_a.id == action_id)))
                        .mappings()
                        .one()
                    )
                    return _record(found)
        return None

    async def record_item(
        self,
        action_id: UUID,
        position: int,
        outcome: Outcome,
        reason: str | None,
        runner: str,
        now: datetime,
    ) -> bool:
        """Record a pending item's outcome and count it, while ``runner`` holds the action."""
        if outcome is Outcome.PENDING:
            return False
        counter = _COUNTERS[outcome]
        try:
            async with self._db.write() as conn:
                held = await conn.execute(
                    update(bulk_actions)
                    .where(_a.id == action_id, _a.status == _RUNNING, _a.runner == runner)
                    .values({counter: counter + 1, _a.heartbeat_at: now})
                )
                if held.rowcount != 1:
                    raise _Lost
                item = await conn.execute(
                    update(bulk_action_items)
                    .where(
                        _i.action_id == action_id,
                        _i.position == position,
                        _i.outcome == Outcome.PENDING.value,
                    )
                    .values(outcome=outcome.value, reason=reason)
                )
                if item.rowcount != 1:
                    raise _Lost
        except _Lost:
            return False
        return True

    async def heartbeat_action(self, action_id: UUID, runner: str, now: datetime) -> bool:
        """Renew the heartbeat of a held Running action."""
        async with self._db.write() as conn:
            result = await conn.execute(
                update(bulk_actions)
                .where(_a.id == action_id, _a.status == _RUNNING, _a.runner == runner)
                .values(heartbeat_at=now)
            )
        return bool(result.rowcount == 1)

    async def end_action(
        self, action_id: UUID, status: ActionStatus, now: datetime, runner: str | None = None
    ) -> ActionRecord | None:
        """End a Running action (held by ``runner``, when given)."""
        conditions = [_a.id == action_id, _a.status == _RUNNING]
        if runner is not None:
            conditions.append(_a.runner == runner)
        async with self._db.write() as conn:
            result = await conn.execute(
                update(bulk_actions)
                .where(*conditions)
                .values(status=status.value, completed_at=now, runner=None, heartbeat_at=None)
            )
            if result.rowcount != 1:
                return None
            found = (
                (await conn.execute(select(bulk_actions).where(_a.id == action_id)))
                .mappings()
                .one()
            )
        return _record(found)
