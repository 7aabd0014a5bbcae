"""The event feed in the ``events`` table, ordered by its identity column.

Events of a state change are written inside the transaction of the change (``insert_events``
and ``SQLITE_INSERT``), so the feed never misses a transition; ``SqlEventStore`` reads the
feed and prunes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import RowMapping, delete, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.records import EventRecord
from bulkops.storage.sql.codec import EVENT_COLUMNS, event_values, sqlite_timestamp
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.schema import events as events_table

# Key of the PostgreSQL advisory lock that orders appends (the bytes of "bkevents").
APPEND_LOCK_KEY = int.from_bytes(b"bkevents", "big", signed=True)
_APPEND_LOCK = text("SELECT pg_advisory_xact_lock(:key)")
SQLITE_INSERT = (
    f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EVENT_COLUMNS)})"
)


def sqlite_event_params(events: Sequence[EventRecord]) -> list[tuple[Any, ...]]:
    """Driver parameters of ``SQLITE_INSERT`` for each event."""
    return [
        (
            str(e.operation_id),
            e.operation_name,
            e.type.value,
            e.severity.value,
            e.message,
            sqlite_timestamp(e.timestamp),
            e.tenant,
        )
        for e in events
    ]


async def insert_events(conn: AsyncConnection, events: Sequence[EventRecord]) -> None:
    """Insert events within the caller's transaction; the database assigns sequences."""
    if not events:
        return
    if conn.dialect.name == "postgresql":
        # Identity values are handed out at INSERT but become visible at COMMIT, so
        # concurrent appenders could commit out of order and a reader polling with
        # ``after`` would skip the late, lower sequence for good. Serialising appends
        # (until commit) makes sequence order commit order. SQLite writers are serialised
        # by BEGIN IMMEDIATE already.
        await conn.execute(_APPEND_LOCK, {"key": APPEND_LOCK_KEY})
    await conn.execute(events_table.insert(), [event_values(e) for e in events])


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
            await insert_events(conn, events)

    async def read(
        self,
        *,
        after: int | None,
        limit: int,
        operation_id: UUID | None = None,
        tenant: str | None = None,
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
