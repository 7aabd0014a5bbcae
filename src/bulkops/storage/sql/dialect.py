"""What differs between SQLite and PostgreSQL, behind one port: the ``Dialect``.

``Database`` picks the implementation once, when it opens (``sqlite.SqliteDialect`` or
``postgres.PostgresDialect``), and the stores ask ``database.dialect`` instead of testing
which database they are on. The hot paths of row processing (batch writes, batch reads,
signal waits, status reads, chunk claims and ends) are whole transactions here, most of
them written at driver level for each database; the rest is how a SQLAlchemy Core
statement or transaction is shaped differently (row locks, transaction locks, inserts that
skip existing keys).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar
from uuid import UUID

from sqlalchemy import Insert, Select, Table
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.records import (
    ChunkRecord,
    EventRecord,
    OperationRecord,
    ReportValues,
    RowOutcome,
    RowRecord,
    WaitOutcome,
)
from bulkops.storage.sql.bulk import SplitWrite
from bulkops.storage.states import OperationStatus, RowState

T = TypeVar("T")
S = TypeVar("S", bound=Select[Any])


class Transactions(Protocol):
    """The async transactions of a database (``Database.read`` and ``Database.write``)."""

    def read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A read transaction."""
        ...

    def write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction."""
        ...


class SqliteThreads(Protocol):
    """Whole SQLite transactions in one hop to a thread (``Database.write_sqlite`` and
    ``Database.read_sqlite``)."""

    async def write_sqlite(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in a write transaction (group commit)."""
        ...

    async def read_sqlite(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in a read transaction."""
        ...


@dataclass(frozen=True, slots=True)
class ChunkClaim:
    """What ``ChunkStore.claim_chunk`` is asked: a chunk of an operation in ``names`` for
    ``worker_id`` (not of ``exclude``; only of ``among`` when given), Pending, or Running with
    a heartbeat older than ``stale_before`` (one of a holder in ``alive`` only when older
    than ``alive_before`` too)."""

    names: Collection[str]
    worker_id: str
    now: datetime
    stale_before: datetime
    exclude: Collection[UUID] = ()
    among: Collection[UUID] | None = None
    alive: Collection[str] = ()
    alive_before: datetime | None = None


class Dialect(Protocol):
    """One database's way of doing what the SQL stores do differently on each."""

    @property
    def name(self) -> str:
        """``sqlite`` or ``postgresql``."""
        ...

    # Statements and transactions of SQLAlchemy Core.

    def for_update(self, stmt: S) -> S:
        """``stmt`` locking the rows it reads until the transaction ends (SQLite's write
        transactions hold the whole database already)."""
        ...

    async def lock(self, conn: AsyncConnection, stmt: Select[Any]) -> None:
        """Within ``conn``'s transaction, lock the rows ``stmt`` selects until it ends
        (on SQLite nothing is run: the write transaction holds the database)."""
        ...

    def skip_locked(self, stmt: S, *, of: Table | None = None) -> S:
        """``stmt`` locking the rows it reads and skipping those another transaction
        holds, so concurrent claimers take different rows."""
        ...

    async def serialise(self, conn: AsyncConnection, key: str) -> None:
        """Within ``conn``'s transaction, wait for the other transactions serialised on
        ``key`` to end (SQLite's writers are serialised already)."""
        ...

    def insert_new(self, table: Table, values: Mapping[str, Any], key: Sequence[str]) -> Insert:
        """An INSERT of ``values`` that does nothing when a row with the same ``key``
        columns exists."""
        ...

    async def insert_events(self, conn: AsyncConnection, events: Sequence[EventRecord]) -> None:
        """Insert events within the caller's transaction, so that their sequence order is
        their commit order; the database assigns the sequences."""
        ...

    async def upsert_rows(
        self, conn: AsyncConnection, operation_id: UUID, rows: Sequence[RowRecord]
    ) -> None:
        """Upsert row records of one operation within the caller's transaction."""
        ...

    # The hot paths, each one transaction.

    async def claim_chunk(self, claim: ChunkClaim) -> ChunkRecord | None:
        """``ChunkStore.claim_chunk``: the first claimable chunk (highest priority, then
        oldest), claimed; None when there is none."""
        ...

    async def end_chunk(
        self, operation_id: UUID, index: int, worker_id: str, *, done: bool
    ) -> int | None:
        """``ChunkStore.end_chunk``: the held chunk Done (or handed back), and how many of
        the operation's chunks are not Done; the ends of one operation's chunks are
        serialised, so exactly one sees none left. None when it was not held."""
        ...

    async def save_many(self, writes: Sequence[SplitWrite]) -> list[OperationStatus | None]:
        """``RowStore.save_many``: one transaction, each write fenced on its own (events
        are written when given)."""
        ...

    async def read_batch(
        self, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
    ) -> list[RowRecord]:
        """The next ``limit`` row records above row ``after`` (in ``states`` when given),
        by row number."""
        ...

    async def read_report_batch(
        self, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
    ) -> list[ReportValues]:
        """The report values of ``read_batch``'s rows."""
        ...

    async def read_outcome_batch(
        self, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
    ) -> list[RowOutcome]:
        """The row outcomes of ``read_batch``'s rows."""
        ...

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """``RowStore.find_waiting``."""
        ...

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """``RowStore.resolve_wait``: the read and the update cannot be split."""
        ...

    async def resolve_first_waiting(
        self, operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
    ) -> RowRecord | None:
        """``RowStore.resolve_first_waiting`` in one transaction."""
        ...

    async def get_operation(self, operation_id: UUID) -> OperationRecord | None:
        """``OperationStore.get`` (status polls, leases)."""
        ...

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """``RowStore.get_row`` (a signal's delivery to its waiting row, a row's detail)."""
        ...
