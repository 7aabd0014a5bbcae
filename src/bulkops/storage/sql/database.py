"""Database URLs, engine set-up, and the read/write transaction helpers every SQL store uses.

SQLite is shared between an API process and a worker process, so every connection runs in
WAL mode with a generous busy timeout, and write transactions start with ``BEGIN IMMEDIATE``:
a writer takes the write lock up front instead of upgrading a read lock mid-transaction,
which SQLite cannot wait for (it fails at once with "database is locked").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from bulkops.errors import StorageError, StorageFull, StorageUnavailable
from bulkops.storage.lanes import LaneActivity, in_processing_lane
from bulkops.storage.sql.dialect import Dialect
from bulkops.storage.sql.pages import PageCounts
from bulkops.storage.sql.postgres import PostgresDialect, configure_postgres
from bulkops.storage.sql.sqlite import SqliteDialect
from bulkops.storage.sql.timeouts import postgres_connect_args, time_limit

T = TypeVar("T")

# Connection execution option that marks a write transaction (SQLite: BEGIN IMMEDIATE).
WRITE_OPTION = "bulkops_write"

SQLITE_BUSY_TIMEOUT_MS = 30_000
_SQLITE_PRAGMAS = (
    "PRAGMA foreign_keys = ON",
    "PRAGMA synchronous = NORMAL",
)
_BASE_DRIVER_ERRORS: tuple[type[BaseException], ...] = (SQLAlchemyError, sqlite3.Error, OSError)


def driver_errors() -> tuple[type[BaseException], ...]:
    """What the boundary translates into StorageError. SQLAlchemy wraps most driver errors,
    but connection set-up and pool code can surface the raw ones, and the COPY of row
    batches raises psycopg's as they are.

    psycopg's base error is in only once psycopg is imported (by PostgreSQL's engine):
    none can be raised before, and a process on SQLite so never carries psycopg."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return _BASE_DRIVER_ERRORS
    return (*_BASE_DRIVER_ERRORS, psycopg.Error)


def describe_error(exc: BaseException) -> str:
    """A short message for a driver error (no SQL text or bound parameters)."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"


def storage_error(action: str, exc: BaseException) -> Exception:
    """The exception to raise for a driver error caught during ``action``.

    A ``ValueError`` from a column type (say, a naive datetime) is the caller's mistake, not
    a backend failure: it comes back unwrapped.
    """
    if (
        isinstance(exc, StatementError)
        and not isinstance(exc, DBAPIError)
        and isinstance(exc.orig, ValueError)
    ):
        return exc.orig
    kind = StorageUnavailable if is_unavailable(exc) else StorageError
    if is_disk_full(exc):
        kind = StorageFull
    return kind(f"{action} failed: {describe_error(exc)}")


def is_disk_full(exc: BaseException) -> bool:
    """True when the database said it has no room left: SQLite's SQLITE_FULL, PostgreSQL's
    class 53 (insufficient resources: disk full, out of memory)."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    if str(getattr(cause, "sqlstate", "") or "").startswith("53"):
        return True
    text = str(cause)
    return "database or disk is full" in text or "No space left on device" in text


def is_unavailable(exc: BaseException) -> bool:
    """True for failures that say the database could not be reached or was busy (a lost
    connection, a refused one, a lock held too long), as opposed to a refused statement."""
    if isinstance(exc, (OSError, TimeoutError, DisconnectionError, sqlite3.OperationalError)):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, (OperationalError, InterfaceError)):
            return True
        return exc.orig is not None and is_unavailable(exc.orig)
    if isinstance(exc, SQLAlchemyError):
        # Pool time-outs and closed connections are not DBAPIErrors.
        return "timeout" in type(exc).__name__.lower() or "closed" in str(exc).lower()
    psycopg = sys.modules.get("psycopg")  # not imported: the error is not psycopg's
    if psycopg is None:
        return False
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


def parse_url(url: str, *, asynchronous: bool) -> URL:
    """Validate a bulkops database URL and pick the driver.

    Accepts ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``postgresql://...`` (also
    ``postgres://`` and ``postgresql+psycopg://``). SQLite uses aiosqlite (async) or sqlite3
    (sync); PostgreSQL uses psycopg 3 for both.

    Raises:
        ValueError: the URL is malformed, names another database, or an in-memory SQLite
            database (each connection would see its own empty database).
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"malformed database URL: {exc}") from exc
    # Read the names from the text: get_driver_name() would load a dialect for "postgres".
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite", "aiosqlite"):
        if not parsed.database or parsed.database == ":memory:" or "mode=memory" in url:
            raise ValueError("an in-memory SQLite database is not supported; use a file path")
        return parsed.set(drivername="sqlite+aiosqlite" if asynchronous else "sqlite")
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg", "psycopg_async"):
        return parsed.set(drivername="postgresql+psycopg")
    shown = parsed.render_as_string(hide_password=True)
    raise ValueError(f"unsupported database URL {shown!r}: use sqlite:/// or postgresql://")


def configure_sqlite(engine: Engine, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> None:
    """Install the pragmas and the BEGIN / BEGIN IMMEDIATE hooks on a SQLite engine.

    The driver's own transaction handling is switched off (``isolation_level=None`` in the
    connect arguments) so that these hooks alone decide how a transaction begins.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        prepare_sqlite_connection(dbapi_connection, busy_timeout_ms)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def prepare_sqlite_connection(
    connection: Any, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> None:
    """Apply the pragmas and WAL mode to a new sqlite3 (or aiosqlite-wrapped) connection.

    ``busy_timeout_ms`` is how long a statement waits for another process's lock before it
    fails with "database is locked" (which the engine then retries with backoff).
    """
    cursor = connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        for pragma in _SQLITE_PRAGMAS:
            cursor.execute(pragma)
        _enable_wal(cursor)
    finally:
        cursor.close()


def _enable_wal(cursor: Any) -> None:
    # The journal mode is stored in the file, so this only changes a brand-new database. The
    # switch needs an exclusive lock, and SQLite reports a conflict at once instead of
    # calling the busy handler (two processes creating one file at start-up), so retry.
    # The sleep may block an event loop briefly, but only while a new file is set up.
    cursor.execute("PRAGMA journal_mode")
    if str(cursor.fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


def engine_arguments(
    url: URL, pool_size: int | None = None, timeout: float | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``create_engine`` / ``create_async_engine`` for this URL.

    On PostgreSQL ``pool_size`` connections are kept open and as many again may be opened
    under load; psycopg prepares a statement once it has run five times on a connection,
    so the hot statements (row writes, counters, status reads) run prepared. ``timeout``
    limits connecting and a silent peer (``timeouts``).
    """
    if url.get_backend_name() == "sqlite":
        return {"connect_args": {"isolation_level": None}}
    arguments: dict[str, Any] = {"pool_pre_ping": True}
    if timeout:
        arguments["connect_args"] = postgres_connect_args(timeout)
    if pool_size is not None:
        arguments.update(pool_size=pool_size, max_overflow=pool_size)
    return arguments


# The API's reader threads of a process that also processes rows yield the CPU to that
# processing when cores are short: many clients reading in closed loops otherwise take the
# cores from the rows (``storage.lanes``). A process that only answers requests (``serve``'s
# HTTP process beside its worker processes, ``--role api``) keeps them at its own priority:
# a lowered reader thread would hold the interpreter lock while it waits for a core, and
# every request of the process would wait with it.
READER_NICE = 5


def _lower_priority(nice: int) -> None:
    """Lower the calling thread's CPU priority by ``nice`` (Linux: per thread)."""
    if nice and hasattr(os, "setpriority"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


class _SqliteThread:
    """One plain sqlite3 connection on one thread, for the hot paths (batch writes, and
    reading row records in batches).

    Each aiosqlite statement is a round trip that waits for a turn of the event loop, and
    a batch write is about ten of them; while rows are being processed those turns come
    late and the loop ends up idle waiting for the database. Here a whole transaction is
    one hop to the thread, and SQLite works outside the interpreter lock meanwhile.
    """

    def __init__(self, path: str, *, write: bool, busy_timeout_ms: int, nice: int = 0) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="bulkops-sqlite",
            initializer=_lower_priority,
            initargs=(nice,),
        )
        self._connection: sqlite3.Connection | None = None
        self._engine: Engine | None = None  # over the same connection, for Core statements

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            prepare_sqlite_connection(connection, self._busy_timeout_ms)
            self._connection = connection
        return self._connection

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        connection = self._connect()
        if connection.in_transaction:  # left open by a failure to end one: start afresh
            connection.execute("ROLLBACK")
        connection.execute(self._begin)
        try:
            result = work(connection)
            connection.execute("COMMIT")
        except BaseException:
            # A failed COMMIT (a deferred constraint, a full disk) can leave the transaction
            # open, and every later BEGIN on this connection would fail; some errors have
            # rolled it back already.
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return result

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._transaction, work)

    async def run_group(self, works: list[Callable[[sqlite3.Connection], Any]]) -> list[Outcome]:
        """Run ``works`` in one transaction, each in a savepoint of its own: one that raises
        is rolled back alone. Raises (and rolls back every work) when the transaction as a
        whole fails."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._group, works)

    def _group(self, works: list[Callable[[sqlite3.Connection], Any]]) -> list[Outcome]:
        def each(connection: sqlite3.Connection) -> list[Outcome]:
            outcomes: list[Outcome] = []
            for work in works:
                connection.execute("SAVEPOINT work")
                try:
                    outcomes.append((True, work(connection)))
                except Exception as exc:
                    connection.execute("ROLLBACK TO work")
                    outcomes.append((False, exc))
                connection.execute("RELEASE work")
            return outcomes

        return self._transaction(each)

    def _core(self, work: Callable[[Connection], T]) -> T:
        """``work`` on a SQLAlchemy connection over this thread's sqlite3 connection, in
        one transaction (begun by the hooks of ``configure_sqlite``)."""
        if self._engine is None:
            self._engine = create_engine("sqlite://", creator=self._connect, poolclass=StaticPool)
            configure_sqlite(self._engine, self._busy_timeout_ms)
        with self._engine.connect() as connection, connection.begin():
            return work(connection)

    async def run_core(self, work: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._core, work)

    def _close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close)
        self._executor.shutdown(wait=True)


Outcome = tuple[bool, Any]  # (returned, its value) or (raised, the exception)


class _WriteGroup:
    """Group commit for the SQLite writer thread. Each transaction is a thread hop and a
    turn of the event loop to hand its result back, so many small writes at once (signals)
    would queue behind each other for them. Writes that arrive while a group is stored go
    together in the next one."""

    def __init__(
        self,
        thread: _SqliteThread,
        turn: Callable[[], contextlib.AbstractAsyncContextManager[None]],
    ) -> None:
        self._thread = thread
        self._turn = turn
        self._pending: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._draining = False

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((work, done))
        if not self._draining:
            self._draining = True
            drain = asyncio.ensure_future(self._drain())
            drain.add_done_callback(_quiet)
        return await done

    async def _drain(self) -> None:
        try:
            while self._pending:
                async with self._turn():  # the writes that came meanwhile join this group
                    group, self._pending = self._pending, []
                    await self._store(group)
        finally:
            self._draining = False

    async def _store(
        self, group: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]]
    ) -> None:
        try:
            if len(group) == 1:  # no savepoint needed
                work, done = group[0]
                outcomes: list[Outcome] = [(True, await self._thread.run(work))]
            else:
                outcomes = await self._thread.run_group([work for work, _ in group])
        except BaseException as exc:  # the transaction failed: every write of it did
            for _, done in group:
                if not done.done():
                    done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, done), (returned, value) in zip(group, outcomes, strict=True):
            if done.done():  # its writer was cancelled meanwhile; the write stands
                continue
            if returned:
                done.set_result(value)
            else:
                done.set_exception(value)


def _quiet(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: the writers got it


class Database:
    """Owns the async engine; hands out read and write transactions, and the ``dialect``.

    Every store goes through ``read()`` / ``write()`` (or, for SQLite batch writes,
    ``write_sqlite()``), which is where driver errors become ``StorageError``; what differs
    between the databases it asks ``dialect``, chosen here once.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        sqlite_path: str | None = None,
        busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
        timeout: float | None = None,
        processing_here: bool = True,
    ) -> None:
        self._engine = engine
        # PostgreSQL: seconds a transaction may take before it fails as unavailable (None:
        # no limit); a silent partition is noticed within it (``timeouts``).
        self.timeout = None if sqlite_path else timeout
        self._closed = False
        self._writer = self._reader = self._pager = None
        self._lane_reader = self._lane_pager = None
        if sqlite_path:
            nice = READER_NICE if processing_here else 0
            self._writer = _SqliteThread(sqlite_path, write=True, busy_timeout_ms=busy_timeout_ms)
            self._reader = _SqliteThread(
                sqlite_path, write=False, busy_timeout_ms=busy_timeout_ms, nice=nice
            )
            # Pages (several statements a hop) read on a thread of their own, so that the
            # one-statement reads (a status) never queue behind them.
            self._pager = _SqliteThread(
                sqlite_path, write=False, busy_timeout_ms=busy_timeout_ms, nice=nice
            )
            # The same two for processing (``storage.lanes``): its reads never queue behind
            # those of the API's readers.
            self._lane_reader = _SqliteThread(
                sqlite_path, write=False, busy_timeout_ms=busy_timeout_ms
            )
            self._lane_pager = _SqliteThread(
                sqlite_path, write=False, busy_timeout_ms=busy_timeout_ms
            )
        # SQLite lets one connection write at a time and makes the others sleep in its busy
        # handler (backing off up to 100 ms). Writers of this process queue here instead;
        # the busy timeout is left for other processes.
        self._write_lock: asyncio.Lock | None = None
        self._group: _WriteGroup | None = None
        self.dialect: Dialect = SqliteDialect(self) if sqlite_path else PostgresDialect(self)
        # What page reads of this database keep between reads (counts of rows).
        self.page_counts = PageCounts()
        # When processing last wrote here (the API holds its reads back meanwhile).
        self.processing = LaneActivity()

    @asynccontextmanager
    async def _local_write_turn(self) -> AsyncIterator[None]:
        if self._writer is None:  # PostgreSQL locks rows, not the database
            yield
            return
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            yield

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        echo: bool = False,
        sqlite_busy_timeout: float | None = None,
        pool_size: int | None = None,
        timeout: float | None = None,
        processing_here: bool = True,
    ) -> Database:
        """Create the engine for a database URL (see ``parse_url``). Connects lazily.

        Args:
            url: the database URL.
            echo: log every statement.
            sqlite_busy_timeout: seconds a SQLite statement waits for another process's
                lock (default 30).
            pool_size: PostgreSQL connections kept open (default: SQLAlchemy's 5).
            timeout: PostgreSQL: seconds a connection attempt or a transaction may take,
                and after which a silent peer is given up (None or 0: no limit).
            processing_here: this process processes rows as well as answering reads
                (SQLite: the API's reader threads then yield the CPU to processing).
        """
        parsed = parse_url(url, asynchronous=True)
        arguments = engine_arguments(parsed, pool_size, timeout)
        engine = create_async_engine(parsed, echo=echo, **arguments)
        if parsed.get_backend_name() == "sqlite":
            busy = SQLITE_BUSY_TIMEOUT_MS
            if sqlite_busy_timeout is not None:
                busy = int(sqlite_busy_timeout * 1000)
            configure_sqlite(engine.sync_engine, busy)
            return cls(
                engine,
                sqlite_path=parsed.database,
                busy_timeout_ms=busy,
                processing_here=processing_here,
            )
        configure_postgres(engine.sync_engine)
        return cls(engine, timeout=timeout or None)

    async def read_sqlite(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one read transaction on the SQLite reader thread."""
        if self._closed or self._reader is None:
            raise StorageError("the database is closed")
        reader = self._lane_reader if in_processing_lane() else self._reader
        try:
            return await (reader or self._reader).run(work)
        except driver_errors() as exc:
            raise storage_error("database read", exc) from exc

    async def read_core(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` (SQLAlchemy Core on a synchronous connection) in one read
        transaction: on SQLite in one hop to the reader thread, whatever number of
        statements it runs (each statement of ``read()`` waits for a turn of the event
        loop); on PostgreSQL through the async connection."""
        if self._closed:
            raise StorageError("the database is closed")
        if self._pager is None:
            async with self.read() as connection:
                return await connection.run_sync(work)
        pager = self._lane_pager if in_processing_lane() else self._pager
        try:
            return await (pager or self._pager).run_core(work)
        except driver_errors() as exc:
            raise storage_error("database read", exc) from exc

    async def write_sqlite(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in a ``BEGIN IMMEDIATE`` transaction on the SQLite writer thread.

        Writes that arrive while another is stored wait for their turn together and share
        the next transaction (group commit), each in a savepoint of its own: its changes
        are committed when it returns, rolled back when it raises, whatever the others do.
        """
        if self._closed or self._writer is None:
            raise StorageError("the database is closed")
        self.processing.note()
        if self._group is None:
            self._group = _WriteGroup(self._writer, self._local_write_turn)
        try:
            result: T = await self._group.write(work)
        except driver_errors() as exc:
            raise storage_error("database write", exc) from exc
        return result

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A transaction for reads; on SQLite it takes no write lock."""
        async with self._transaction(write=False) as connection:
            yield connection

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: ``BEGIN IMMEDIATE`` on SQLite, a normal one on PostgreSQL.

        Commits when the block ends, rolls back when it raises.
        """
        async with self._transaction(write=True) as connection:
            yield connection

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[AsyncConnection]:
        if self._closed:
            raise StorageError("the database is closed")
        if write:
            self.processing.note()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.timeout is not None:  # outermost: it also bounds the wait for a turn
                    await stack.enter_async_context(time_limit(self.timeout))
                if write:
                    await stack.enter_async_context(self._local_write_turn())
                connection = await stack.enter_async_context(self._engine.connect())
                if write:
                    await connection.execution_options(**{WRITE_OPTION: True})
                async with connection.begin():
                    yield connection
        except TimeoutError as exc:
            action = "database write" if write else "database read"
            if self.timeout is None:
                raise storage_error(action, exc) from exc
            raise StorageUnavailable(
                f"{action} failed: no answer within {self.timeout:g} s (BULKOPS_STORAGE_TIMEOUT)"
            ) from exc
        except driver_errors() as exc:
            raise storage_error("database write" if write else "database read", exc) from exc

    async def close(self) -> None:
        """Close every pooled connection; later calls raise ``StorageError``."""
        if self._closed:
            return
        self._closed = True
        try:
            threads = (self._writer, self._reader, self._pager, self._lane_reader, self._lane_pager)
            for thread in threads:
                if thread is not None:
                    await thread.close()
            await self._engine.dispose()
        except driver_errors() as exc:
            raise StorageError(f"closing the database failed: {describe_error(exc)}") from exc
