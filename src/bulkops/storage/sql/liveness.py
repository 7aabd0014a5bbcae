"""Liveness on SQL: a session lock on PostgreSQL, the process table on one SQLite host.

PostgreSQL: each processing process holds a session-level advisory lock, keyed by its
worker id, on a connection of its own. The server releases it when the session ends, and
it ends when the process dies (its socket closes). A holder whose lock nobody holds is
dead; a lock lost with a connection (the process alive) is taken again within
``RETAKE_DELAY``, and callers confirm a death over a longer time than that. A holder whose
lock a session holds is alive (a session the server has not yet seen end, of a host that
vanished, counts as alive: callers bound how long that spares its work). Only ids marked
``+live`` are judged, so a process that never took a lock is left to its heartbeat.

SQLite: every process sharing the file runs on one host. A holder whose id
(``host:pid:...``) names this host and a process id that no longer runs is dead; one whose
process id runs is alive (a process id reused by another process is taken for alive too:
callers bound how long that spares its work). Holders of other hosts are left to their
heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, union, update

from bulkops.storage.lifecycle import HELD_STATUSES
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.schema import chunks, operations
from bulkops.storage.sql.timeouts import postgres_connect_args
from bulkops.storage.sql.wakeups import libpq_url
from bulkops.storage.states import ChunkState

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("bulkops.storage")

LOCK_SPACE = 0x0B0B  # the first key of every liveness lock: bulkops' own space
MARK = "+live"
RETAKE_DELAY = 0.25  # seconds between tries to take the lock again after losing it
_CHECK = 1.0  # seconds between checks that the lock's session still stands

_TAKE = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
_HOLDERS_BY_LOCK = f"""
SELECT h.worker_id FROM (
    SELECT worker_id FROM operations WHERE status = ANY(%s) AND worker_id IS NOT NULL
    UNION SELECT worker_id FROM chunks WHERE state = %s AND worker_id IS NOT NULL
) AS h
WHERE h.worker_id LIKE '%%{MARK}' AND {{held}} EXISTS (
    SELECT 1 FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = {LOCK_SPACE}
      AND l.objid = (hashtext(h.worker_id)::bigint & 4294967295)::oid
)
"""
_DEAD = _HOLDERS_BY_LOCK.format(held="NOT")
_ALIVE = _HOLDERS_BY_LOCK.format(held="")
_HELD = sorted(status.value for status in HELD_STATUSES)


class SqlLiveness:
    """What both databases share: finding holders, voiding their heartbeats."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def mark(self, worker_id: str) -> str:
        """The id unchanged."""
        return worker_id

    async def keep(self, worker_id: str) -> None:
        """Nothing to keep."""

    async def dead(self) -> set[str]:
        """None known."""
        return set()

    async def alive(self) -> set[str]:
        """None known."""
        return set()

    async def _holder_ids(self) -> set[str]:
        held = select(operations.c.worker_id).where(
            operations.c.status.in_(_HELD), operations.c.worker_id.is_not(None)
        )
        running = select(chunks.c.worker_id).where(
            chunks.c.state == ChunkState.RUNNING, chunks.c.worker_id.is_not(None)
        )
        async with self._db.read() as conn:
            found = await conn.execute(union(held, running))
            return {row[0] for row in found}

    async def expire(self, worker_ids: Collection[str]) -> None:
        """Set the heartbeats of what they hold to none (abandoned at once)."""
        if not worker_ids:
            return
        ids = sorted(worker_ids)
        async with self._db.write() as conn:
            await conn.execute(
                update(operations)
                .where(operations.c.worker_id.in_(ids), operations.c.status.in_(_HELD))
                .values(heartbeat_at=None)
            )
            await conn.execute(
                update(chunks)
                .where(chunks.c.worker_id.in_(ids), chunks.c.state == ChunkState.RUNNING)
                .values(heartbeat_at=None)
            )


class SqliteLiveness(SqlLiveness):
    """Dead: a holder of this host whose process id no longer runs; alive: one whose
    process id runs."""

    async def dead(self) -> set[str]:
        """Holders of this host whose process is gone."""
        host = socket.gethostname()
        return {worker for worker in await self._holder_ids() if _runs(worker, host) is False}

    async def alive(self) -> set[str]:
        """Holders of this host whose process runs."""
        host = socket.gethostname()
        return {worker for worker in await self._holder_ids() if _runs(worker, host)}


def _runs(worker_id: str, host: str) -> bool | None:
    """Whether ``worker_id`` (``host:pid:...``) names a process of ``host`` that runs; None
    when it names no process of ``host``."""
    parts = worker_id.split(":")
    if len(parts) < 3 or parts[0] != host or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True


class PostgresLiveness(SqlLiveness):
    """Dead: a marked holder whose advisory lock no session holds; alive: one whose lock a
    session holds."""

    def __init__(self, database: Database, url: str) -> None:
        super().__init__(database)
        self._url = libpq_url(url)

    def mark(self, worker_id: str) -> str:
        """``worker_id`` with the mark of a process that holds a liveness lock."""
        return worker_id + MARK

    async def keep(self, worker_id: str) -> None:
        """Hold the lock on a connection of its own until cancelled; take it again at once
        after losing it."""
        import psycopg  # here: a process on SQLite imports this module but never psycopg

        while True:
            try:
                timeout = self._db.timeout
                limits = postgres_connect_args(timeout) or {"connect_timeout": 5}
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, **limits
                ) as conn:
                    while not await _take(conn, worker_id):
                        await asyncio.sleep(RETAKE_DELAY)  # a session of ours not yet gone
                    while True:
                        await asyncio.sleep(_CHECK)
                        # A check that gets no answer (a silent partition) gives the
                        # connection up: the server's keepalives end the session there.
                        async with asyncio.timeout(timeout):
                            await conn.execute("SELECT 1")
            except (psycopg.Error, OSError) as exc:
                log.debug("Liveness lock lost (%s); taking it again", exc)
                await asyncio.sleep(RETAKE_DELAY)

    async def dead(self) -> set[str]:
        """Marked holders whose lock no session holds."""
        async with self._db.read() as conn:
            found = await conn.exec_driver_sql(_DEAD, (_HELD, ChunkState.RUNNING.value))
            return {row[0] for row in found}

    async def alive(self) -> set[str]:
        """Marked holders whose lock a session holds."""
        async with self._db.read() as conn:
            found = await conn.exec_driver_sql(_ALIVE, (_HELD, ChunkState.RUNNING.value))
            return {row[0] for row in found}


async def _take(conn: psycopg.AsyncConnection[Any], worker_id: str) -> bool:
    cursor = await conn.execute(_TAKE, (LOCK_SPACE, worker_id))
    row = await cursor.fetchone()
    return bool(row and row[0])
