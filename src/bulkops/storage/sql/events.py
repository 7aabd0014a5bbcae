"""The event feed in the ``events`` table, ordered by its identity column.

Events of a state change are written inside the transaction of the change (by the
dialect's ``insert_events`` or its batch write), so the feed never misses a transition;
``SqlEventStore`` reads the feed and prunes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from sqlalchemy import RowMapping, delete, select

from bulkops.storage.records import EventRecord
from bulkops.storage.sql.codec import EVENT_COLUMNS
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.schema import events as events_table


def _event_from_row(row: RowMapping) -> EventRecord:
    return EventRecord(**{name: row[name] for name in (*EVENT_COLUMNS, "sequence")})


class SqlEventStore:
    """The event feed in SQLite or PostgreSQL.

    Sequences come from the database (an identity / AUTOINCREMENT column), so every process
    writing to the same database feeds one ordering and pruned sequences are never reused.

    Args:
        database: the shared engine wrapper (see ``Database.from_url``).
    """

    def __init__(self, database: Database) -> None:
        self._db = database

    async def append(self, events: Sequence[EventRecord]) -> None:
        """Record events outside any state change; the database assigns sequences."""
        async with self._db.write() as conn:
            await self._db.dialect.insert_events(conn, events)

    async def read(
        self,
        *,
        after: int | None,
        limit: int,
        operation_id: UUID | None = None,
        tenant: str | None = None,
        actor: str | None = None,
    ) -> Sequence[EventRecord]:
        """Events oldest first: those above ``after``, or the newest ``limit`` without it."""
        if limit < 1:
            return []
        seq = events_table.c.sequence
        stmt = select(events_table)
        if operation_id is not None:
            stmt = stmt.where(events_table.c.operation_id == operation_id)
        if tenant is not None:
            stmt = stmt.where(events_table.c.tenant == tenant)
        if actor is not None:
            stmt = stmt.where(events_table.c.actor == actor)
        if after is None:
            stmt = stmt.order_by(seq.desc()).limit(limit)
        else:
            stmt = stmt.where(seq > after).order_by(seq).limit(limit)
        rows = await self._db.read_core(lambda conn: conn.execute(stmt).mappings().all())
        found = [_event_from_row(row) for row in rows]
        if after is None:
            found.reverse()
        return found

    async def prune(self, before: datetime) -> int:
        """Delete events older than ``before``; return how many."""
        async with self._db.write() as conn:
            result = await conn.execute(
                delete(events_table).where(events_table.c.timestamp < before)
            )
        return result.rowcount
