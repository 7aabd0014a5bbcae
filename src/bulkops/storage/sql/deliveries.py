"""DeliveryStore on SQL: the notification outbox.

Deliveries are inserted by the adapters that persist an operation change, in its
transaction (``insert_deliveries``). A claim takes due ones for a lease; on PostgreSQL
with ``FOR UPDATE SKIP LOCKED``, so concurrent dispatchers skip each other's picks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import RowMapping, and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.records import DeliveryRecord
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.schema import notification_deliveries
from bulkops.storage.states import DeliveryState

_d = notification_deliveries.c
_FIELDS = (
    "id",
    "operation_id",
    "channel",
    "target",
    "trigger",
    "event",
    "payload",
    "created_at",
    "state",
    "attempts",
    "next_attempt_at",
    "last_status_code",
    "last_error",
    "delivered_at",
    "claimed_by",
    "claimed_until",
)


def _values(delivery: DeliveryRecord) -> dict[str, Any]:
    return {name: getattr(delivery, name) for name in _FIELDS}


def _record(row: RowMapping) -> DeliveryRecord:
    return DeliveryRecord(**{name: row[name] for name in _FIELDS})


async def insert_deliveries(conn: AsyncConnection, deliveries: Sequence[DeliveryRecord]) -> None:
    """Store deliveries within the caller's transaction (the change that caused them)."""
    if deliveries:
        await conn.execute(notification_deliveries.insert(), [_values(d) for d in deliveries])


class DeliveryMethods(SqlBase):
    """The DeliveryStore part of ``SqlStore``."""

    async def claim_deliveries(
        self, claimer: str, now: datetime, lease_until: datetime, limit: int
    ) -> Sequence[DeliveryRecord]:
        """Claim due Pending deliveries nobody holds, oldest first."""
        if limit < 1:
            return []
        due = and_(
            _d.state == DeliveryState.PENDING,
            or_(_d.next_attempt_at.is_(None), _d.next_attempt_at <= now),
            or_(_d.claimed_until.is_(None), _d.claimed_until < now),
        )
        pick = select(_d.id).where(due).order_by(_d.next_attempt_at, _d.id).limit(limit)
        pick = self._db.dialect.skip_locked(pick)
        async with self._db.write() as conn:
            ids = list((await conn.execute(pick)).scalars().all())
            if not ids:
                return []
            claim = (
                update(notification_deliveries)
                .where(_d.id.in_(ids), due)
                .values(claimed_by=claimer, claimed_until=lease_until)
            )
            await conn.execute(claim)
            found = await conn.execute(
                select(notification_deliveries)
                .where(_d.id.in_(ids), _d.claimed_by == claimer)
                .order_by(_d.next_attempt_at, _d.id)
            )
            return [_record(row) for row in found.mappings().all()]

    async def record_attempt(
        self,
        delivery_id: UUID,
        claimer: str,
        *,
        state: DeliveryState,
        now: datetime,
        status_code: int | None = None,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        """Record an attempt of a held delivery and release it."""
        stmt = (
            update(notification_deliveries)
            .where(
                _d.id == delivery_id,
                _d.claimed_by == claimer,
                _d.state == DeliveryState.PENDING,
            )
            .values(
                state=state,
                attempts=_d.attempts + 1,
                last_status_code=status_code,
                last_error=error,
                next_attempt_at=next_attempt_at,
                delivered_at=now if state is DeliveryState.DELIVERED else None,
                claimed_by=None,
                claimed_until=None,
            )
        )
        async with self._db.write() as conn:
            return bool((await conn.execute(stmt)).rowcount)

    async def deliveries(self, operation_id: UUID) -> Sequence[DeliveryRecord]:
        """Every delivery of an operation, oldest first."""
        stmt = (
            select(notification_deliveries)
            .where(_d.operation_id == operation_id)
            .order_by(_d.created_at, _d.id)
        )
        async with self._db.read() as conn:
            return [_record(row) for row in (await conn.execute(stmt)).mappings().all()]
