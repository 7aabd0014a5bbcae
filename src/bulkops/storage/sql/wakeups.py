"""Wake-ups on PostgreSQL: ``NOTIFY`` to announce, one ``LISTEN`` connection per process.

A notice wakes workers at once instead of at their next poll: a created or retried
operation, chunks of a split operation, a signal recorded by another process. Notices are
best effort (lost while a listener reconnects); the pollers remain the fallback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url

from bulkops.errors import StorageError
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.timeouts import postgres_connect_args

log = logging.getLogger("bulkops.storage")

WORK_CHANNEL = "bulkops_work"
SIGNAL_CHANNEL = "bulkops_signal"
_RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0)
_MAX_PAYLOAD = 7900  # PostgreSQL's limit is 8000 bytes


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as libpq takes it (no driver suffix)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresWakeUps:
    """``WakeUps`` through PostgreSQL's ``LISTEN``/``NOTIFY``."""

    def __init__(self, database: Database, url: str) -> None:
        self._db = database
        self._url = libpq_url(url)

    async def _notify(self, channel: str, payload: str) -> None:
        try:
            async with self._db.write() as conn:
                await conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})
        except StorageError:
            log.debug("Could not announce on %s; pollers will find the work", channel)

    async def announce_work(self) -> None:
        """``NOTIFY bulkops_work``."""
        await self._notify(WORK_CHANNEL, "")

    async def announce_signal(self, key: str) -> None:
        """``NOTIFY bulkops_signal, '<key>'`` (a key too long for a notice is left to the
        signal pollers)."""
        if len(key.encode()) <= _MAX_PAYLOAD:
            await self._notify(SIGNAL_CHANNEL, key)

    async def listen(self, on_work: Callable[[], None], on_signal: Callable[[str], None]) -> None:
        """Listen on both channels until cancelled, reconnecting with backoff."""
        import psycopg  # here: a process on SQLite imports this module but never psycopg

        attempt = 0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, **postgres_connect_args(self._db.timeout)
                ) as conn:
                    await conn.execute(f"LISTEN {WORK_CHANNEL}")
                    await conn.execute(f"LISTEN {SIGNAL_CHANNEL}")
                    attempt = 0
                    log.info("Listening for wake-ups (LISTEN %s, %s)", WORK_CHANNEL, SIGNAL_CHANNEL)
                    on_work()  # work announced while no one listened is looked for now
                    async for notice in conn.notifies():
                        if notice.channel == WORK_CHANNEL:
                            on_work()
                        elif notice.channel == SIGNAL_CHANNEL:
                            on_signal(notice.payload)
            except (psycopg.Error, OSError) as exc:
                delay = _RECONNECT_DELAYS[min(attempt, len(_RECONNECT_DELAYS) - 1)]
                attempt += 1
                log.warning(
                    "Wake-up listener lost its connection (%s); retrying in %g s", exc, delay
                )
                await asyncio.sleep(delay)
