"""What every part of ``SqlStore`` shares: the database and where events go."""

from __future__ import annotations

from collections.abc import Sequence

from bulkops.storage.ports import EventStore
from bulkops.storage.records import EventRecord
from bulkops.storage.sql.bulk import ListedSteps
from bulkops.storage.sql.database import Database


class SqlBase:
    """The database, and the feed the events of changes go to.

    Events are written in the transaction of their change when the feed lives in this
    database (``event_log`` None); a per-process feed gets them right after the commit.
    """

    def __init__(self, database: Database, event_log: EventStore | None = None) -> None:
        self._db = database
        self._event_log = event_log
        self._events_here = event_log is None
        self._listed_steps = ListedSteps()

    async def _after_commit(self, events: Sequence[EventRecord]) -> None:
        if self._event_log is not None and events:
            await self._event_log.append(events)
