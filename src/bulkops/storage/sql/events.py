"""``SqlEventStore``: the event feed in the ``events`` table, ordered by its identity column."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from sqlalchemy import RowMapping, delete, select, text

from bulkops.storage.records import EventRecord
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.schema import events as events_table

# Key of the PostgreSQL advisory lock that orders appends (the bytes of "bkevents").
APPEND_LOCK_KEY = int.from_bytes(b"bkevents", "big", signed=True)
_APPEND_LOCK = text("SELECT pg_advisory_xact_lock(:key)")


def _event_from_row(row: RowMapping) -> EventRecord:
    return EventRecord(
        operation_id=row["operation_id"],
        operation_name=row["operation_name"],
        type=row["type"],
        severity=row["severity"],
        message=row["message"],
        timestamp=row["timestamp"],
        sequence=row["sequence"],
    )


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
        """Record events; the database assigns their sequences in order."""
        if not events:
            return
        params = [
            {
                "operation_id": e.operation_id,
                "operation_name": e.operation_name,
                "type": e.type,
                "severity": e.severity,
                "message": e.message,
                "timestamp": e.timestamp,
            }
            for e in events
        ]
        async with self._db.write() as conn:
            if self._db.dialect_name == "postgresql":
                # Identity values are handed out at INSERT but become visible at COMMIT, so
                # concurrent appenders could commit out of order and a reader polling with
                # ``after`` would skip the late, lower sequence for good. Serialising appends
                # (until commit) makes sequence order commit order. SQLite writers are
                # serialised by BEGIN IMMEDIATE already.
                await conn.execute(_APPEND_LOCK, {"key": APPEND_LOCK_KEY})
            await conn.execute(events_table.insert(), params)

    async def read(
        self, *, after: int | None, limit: int, operation_id: UUID | None = None
    ) -> Sequence[EventRecord]:
        """Events oldest first: those above ``after``, or the newest ``limit`` without it."""
        if limit < 1:
            return []
        seq = events_table.c.sequence
        stmt = select(events_table)
        if operation_id is not None:
            stmt = stmt.where(events_table.c.operation_id == operation_id)
        if after is None:
            stmt = stmt.order_by(seq.desc()).limit(limit)
        else:
            stmt = stmt.where(seq > after).order_by(seq).limit(limit)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
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
