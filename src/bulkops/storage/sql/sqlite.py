"""SQLite's ``Dialect``: the hot paths as whole transactions for the writer and reader
threads; Core statements unchanged (the writer holds the database, so no row locks).

Each aiosqlite statement is a round trip that waits for a turn of the event loop; while
rows are being processed those turns come late. Here a batch write or read is one hop to
a thread (see ``Database.write_sqlite``), and SQLite works outside the interpreter lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import Insert, Select, Table
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage import lifecycle
from bulkops.storage.records import (
    OUTCOME_FIELDS,
    REPORT_FIELDS,
    ChunkRecord,
    EventRecord,
    OperationRecord,
    ReportValues,
    RowOutcome,
    RowRecord,
    WaitOutcome,
)
from bulkops.storage.sql.bulk import (
    SQLITE_SPAN_CLEAR,
    SQLITE_SPAN_UPSERT,
    SQLITE_UPSERT,
    SplitWrite,
)
from bulkops.storage.sql.codec import (
    CHUNK_COLUMNS,
    EVENT_COLUMNS,
    OPERATION_COLUMNS,
    ROW_VALUE_COLUMNS,
    WAIT_END_COLUMNS,
    decode_chunk,
    decode_operation,
    event_values,
    outcome_decoder,
    report_decoder,
    row_decoder,
    span_parameters,
    sqlite_events,
    sqlite_rows,
    sqlite_timestamp,
    wait_end_values,
)
from bulkops.storage.sql.dialect import ChunkClaim, S, SqliteThreads
from bulkops.storage.sql.schema import NOT_COMPLETED
from bulkops.storage.sql.schema import events as events_table
from bulkops.storage.sql.span_reads import (
    driver_rows,
    holding,
    merge,
    span_at_sql,
    span_row,
    spans_after_sql,
    wants_completed,
)
from bulkops.storage.states import ChunkState, OperationStatus, RowState

Work = Callable[[sqlite3.Connection], Any]

_ROW_COLUMNS = ", ".join(ROW_VALUE_COLUMNS)
_INSERT_EVENT = (
    f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EVENT_COLUMNS)})"
)
_SPANS_AFTER = spans_after_sql("?")
_SPAN_AT = span_at_sql("?")
_ADD_COUNTERS = (
    "UPDATE operations SET processed_rows = processed_rows + ?, "
    "successful_rows = successful_rows + ?, error_count = error_count + ? WHERE id = ?"
)
_STATUS = "SELECT status FROM operations WHERE id = ?"
_ADD_STEP = "INSERT OR IGNORE INTO completed_steps (operation_id, step_name) VALUES (?, ?)"
_OPERATION = f"SELECT {', '.join(OPERATION_COLUMNS)} FROM operations WHERE id = ?"
_HELD_CHUNK = (
    "SELECT 1 FROM chunks WHERE operation_id = ? AND chunk_index = ? AND worker_id = ? "
    "AND state = ?"
)


def _save(write: SplitWrite) -> Callable[[sqlite3.Connection], OperationStatus | None]:
    """One write of ``save_many`` within the writer's transaction: nothing is written
    unless its fence holds (events are written when given)."""
    operation_id, rows, delta, events, fence = write
    key = str(operation_id)
    clears, spans = span_parameters(key, rows.spans, sqlite_timestamp)
    encoded = sqlite_rows(operation_id, rows.others)
    steps = [(key, name) for name in rows.new_steps]
    add_counters = _ADD_COUNTERS
    counters: tuple[object, ...] = (delta.processed, delta.successful, delta.failed, key)
    if fence is not None and fence.chunk is None:
        add_counters += " AND worker_id = ?"
        counters += (fence.worker_id,)
    chunk_fence = None
    if fence is not None and fence.chunk is not None:
        chunk_fence = (key, fence.chunk, fence.worker_id, ChunkState.RUNNING.value)

    def work(connection: sqlite3.Connection) -> OperationStatus | None:
        # Final means final: an operation whose status is final takes no rows, counters or
        # events until a retry starts a new round (the writer holds the database, so the
        # status read here stands until commit).
        before = connection.execute(_STATUS, (key,)).fetchone()
        if before is None:
            return None
        if OperationStatus(before[0]).is_terminal:
            return OperationStatus(before[0])
        # The fence keeps a worker that lost the operation (or its chunk) out.
        if (
            chunk_fence is not None
            and connection.execute(_HELD_CHUNK, chunk_fence).fetchone() is None
        ):
            return None
        if connection.execute(add_counters, counters).rowcount == 0:
            return None
        if spans:
            connection.executemany(SQLITE_SPAN_CLEAR, clears)
            connection.executemany(SQLITE_SPAN_UPSERT, spans)
        if encoded:
            connection.executemany(SQLITE_UPSERT, encoded)
        if steps:
            connection.executemany(_ADD_STEP, steps)
        if events:
            connection.executemany(_INSERT_EVENT, sqlite_events(events))
        status = connection.execute(_STATUS, (key,)).fetchone()
        return OperationStatus(status[0])

    return work


def save_many(
    writes: Sequence[SplitWrite],
) -> Callable[[sqlite3.Connection], list[OperationStatus | None]]:
    """``RowStore.save_many`` as one transaction: each write in order, fenced on its own
    (the writer holds the database, so the order of writes locks nothing)."""
    each = [_save(write) for write in writes]

    def work(connection: sqlite3.Connection) -> list[OperationStatus | None]:
        return [save(connection) for save in each]

    return work


def _read_rows(
    columns: Sequence[str],
    operation_id: UUID,
    after: int,
    limit: int,
    states: Collection[RowState] | None,
) -> Callable[[sqlite3.Connection], list[Any]]:
    """The driver values (in ``columns`` order) of the next ``limit`` rows above row
    ``after`` (in ``states`` when given), by row number: stored, or in spans."""
    sql, params = _batch_query(", ".join(columns), operation_id, after, limit, states)
    spans_too = wants_completed(states)
    span_params = (str(operation_id), after, limit)

    def read(connection: sqlite3.Connection) -> list[Any]:
        found = connection.execute(sql, params).fetchall()
        if not spans_too:
            return found
        spans = connection.execute(_SPANS_AFTER, span_params).fetchall()
        return merge(found, spans, after, limit, driver_rows(columns)) if spans else found

    return read


def read_batch(
    operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
) -> Callable[[sqlite3.Connection], list[RowRecord]]:
    """The next ``limit`` row records of the operation above row ``after`` (in ``states``
    when given), by row number."""
    read = _read_rows(ROW_VALUE_COLUMNS, operation_id, after, limit, states)

    def records(connection: sqlite3.Connection) -> list[RowRecord]:
        return list(map(row_decoder(operation_id), read(connection)))

    return records


def read_report_batch(
    operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
) -> Callable[[sqlite3.Connection], list[ReportValues]]:
    """The report values of ``read_batch``'s rows."""
    read = _read_rows(REPORT_FIELDS, operation_id, after, limit, states)

    def report(connection: sqlite3.Connection) -> list[ReportValues]:
        return list(map(report_decoder(), read(connection)))

    return report


def read_outcome_batch(
    operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
) -> Callable[[sqlite3.Connection], list[RowOutcome]]:
    """The row outcomes of ``read_batch``'s rows."""
    read = _read_rows(OUTCOME_FIELDS, operation_id, after, limit, states)

    def outcomes(connection: sqlite3.Connection) -> list[RowOutcome]:
        return list(map(outcome_decoder(), read(connection)))

    return outcomes


def _batch_query(
    columns: str, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
) -> tuple[str, tuple[object, ...]]:
    sql = f"SELECT {columns} FROM row_records WHERE operation_id = ? AND row_number > ?"
    params: tuple[object, ...] = (str(operation_id), after)
    if states is not None:
        sql += f" AND state IN ({', '.join('?' for _ in states)})"
        params += tuple(state.value for state in states)
        if RowState.COMPLETED not in states:
            sql += f" AND {NOT_COMPLETED}"  # the partial state index holds them all
    return sql + " ORDER BY row_number LIMIT ?", (*params, limit)


def _first_waiting(operation_id: UUID, key_prefix: str) -> tuple[str, tuple[object, ...]]:
    """The query of the first row waiting under a key prefix, and its parameters."""
    # The keys starting with the prefix form one range of the (operation_id, signal_key)
    # index: the prefix ends with ":", so they all sort below the prefix with ";" instead.
    # The row number closes the key, so a user key that is a prefix of another ("a" and
    # "a:b") never matches the other's rows.
    sql = (
        f"SELECT {_ROW_COLUMNS} FROM row_records WHERE operation_id = ? "
        "AND signal_key >= ? AND signal_key < ? AND signal_key = ? || row_number AND state = ? "
        "ORDER BY waiting_since, row_number LIMIT 1"
    )
    params = (
        str(operation_id),
        key_prefix,
        key_prefix[:-1] + chr(ord(key_prefix[-1]) + 1) if key_prefix else "\U0010ffff",
        key_prefix,
        RowState.WAITING_FOR_COMPLETION.value,
    )
    return sql, params


def find_waiting(
    operation_id: UUID, key_prefix: str
) -> Callable[[sqlite3.Connection], RowRecord | None]:
    """``RowStore.find_waiting`` in one hop."""
    sql, params = _first_waiting(operation_id, key_prefix)

    def find(connection: sqlite3.Connection) -> RowRecord | None:
        found = connection.execute(sql, params).fetchone()
        return None if found is None else row_decoder(operation_id)(found)

    return find


def _wait_condition(
    operation_id: UUID, row_number: int, signal_key: str | None
) -> tuple[str, tuple[object, ...]]:
    """The row still waits, under that key (or none, for polling steps)."""
    key_clause = "signal_key IS NULL" if signal_key is None else "signal_key = ?"
    condition = f"operation_id = ? AND row_number = ? AND state = ? AND {key_clause}"
    params: tuple[object, ...] = (
        str(operation_id),
        row_number,
        RowState.WAITING_FOR_COMPLETION.value,
    ) + (() if signal_key is None else (signal_key,))
    return condition, params


_END_WAIT = ", ".join(f"{name} = ?" for name in WAIT_END_COLUMNS)


def _end_wait(connection: sqlite3.Connection, row: RowRecord, outcome: WaitOutcome) -> RowRecord:
    """Store the end of a wait of a row read in this transaction."""
    resolved = lifecycle.resolve_wait(row, outcome)
    condition, params = _wait_condition(row.operation_id, row.row_number, row.signal_key)
    update = f"UPDATE row_records SET {_END_WAIT} WHERE {condition}"
    connection.execute(update, wait_end_values(resolved, sqlite_timestamp) + params)
    return resolved


def _final(connection: sqlite3.Connection, operation_id: UUID) -> bool:
    """The operation's status is final: its waiting rows wait on (final means final)."""
    found = connection.execute(_STATUS, (str(operation_id),)).fetchone()
    return found is not None and OperationStatus(found[0]).is_terminal


def resolve_wait(
    operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
) -> Callable[[sqlite3.Connection], RowRecord | None]:
    """``RowStore.resolve_wait`` in one hop (inside the writer's ``BEGIN IMMEDIATE``, so the
    read and the update cannot be split by another writer)."""
    condition, params = _wait_condition(operation_id, row_number, signal_key)
    select = f"SELECT {_ROW_COLUMNS} FROM row_records WHERE {condition}"

    def resolve(connection: sqlite3.Connection) -> RowRecord | None:
        if _final(connection, operation_id):
            return None
        found = connection.execute(select, params).fetchone()
        if found is None:
            return None
        return _end_wait(connection, row_decoder(operation_id)(found), outcome)

    return resolve


def resolve_first_waiting(
    operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
) -> Callable[[sqlite3.Connection], RowRecord | None]:
    """``RowStore.resolve_first_waiting`` in one hop of the writer."""
    sql, params = _first_waiting(operation_id, key_prefix)

    def resolve(connection: sqlite3.Connection) -> RowRecord | None:
        if _final(connection, operation_id):
            return None
        found = connection.execute(sql, params).fetchone()
        if found is None:
            return None
        row = row_decoder(operation_id)(found)
        return _end_wait(connection, row, outcome(row))

    return resolve


def get_operation(operation_id: UUID) -> Callable[[sqlite3.Connection], OperationRecord | None]:
    """``OperationStore.get`` in one hop (status polls, leases)."""

    def read(connection: sqlite3.Connection) -> OperationRecord | None:
        found = connection.execute(_OPERATION, (str(operation_id),)).fetchone()
        return None if found is None else decode_operation(found)

    return read


_ROW = f"SELECT {_ROW_COLUMNS} FROM row_records WHERE operation_id = ? AND row_number = ?"


def get_row(
    operation_id: UUID, row_number: int
) -> Callable[[sqlite3.Connection], RowRecord | None]:
    """``RowStore.get_row`` in one hop (a signal's delivery to its waiting row)."""

    def read(connection: sqlite3.Connection) -> RowRecord | None:
        key = (str(operation_id), row_number)
        found = connection.execute(_ROW, key).fetchone()
        if found is None:
            span = holding(connection.execute(_SPAN_AT, key).fetchone(), row_number)
            if span is None:
                return None
            found = span_row(ROW_VALUE_COLUMNS, span, row_number)
        return row_decoder(operation_id)(found)

    return read


_CHUNK = f"SELECT {', '.join(CHUNK_COLUMNS)} FROM chunks WHERE operation_id = ? AND chunk_index = ?"
_CLAIM_CHUNK = (
    "UPDATE chunks SET state = ?, worker_id = ?, heartbeat_at = ?, version = version + 1, "
    "resume_count = resume_count + ? WHERE operation_id = ? AND chunk_index = ? AND version = ?"
)


def _claimable_chunk(claim: ChunkClaim) -> tuple[str, list[object]]:
    """The query of ``ChunkStore.claim_chunk``'s pick: the first claimable chunk."""
    names = sorted({name.casefold() for name in claim.names})
    params: list[object] = [OperationStatus.RUNNING.value, *names]
    stale = "c.heartbeat_at < ?"
    params_stale: list[object] = [sqlite_timestamp(claim.stale_before)]
    if claim.alive:
        alive = sorted(claim.alive)
        spared = f"c.worker_id IS NOT NULL AND c.worker_id IN ({_marks(alive)})"
        params_stale.extend(alive)
        if claim.alive_before is not None:
            spared += " AND c.heartbeat_at >= ?"
            params_stale.append(sqlite_timestamp(claim.alive_before))
        stale = f"{stale} AND NOT ({spared})"
    sql = (
        "SELECT c.operation_id, c.chunk_index, c.version, c.state FROM chunks c "
        "JOIN operations o ON o.id = c.operation_id "
        f"WHERE o.status = ? AND lower(o.operation_name) IN ({_marks(names)}) "
        f"AND (c.state = ? OR (c.state = ? AND (c.heartbeat_at IS NULL OR ({stale}))))"
    )
    params.extend([ChunkState.PENDING.value, ChunkState.RUNNING.value, *params_stale])
    if claim.exclude:
        excluded = sorted(str(operation) for operation in claim.exclude)
        sql += f" AND c.operation_id NOT IN ({_marks(excluded)})"
        params.extend(excluded)
    if claim.among is not None:
        among = sorted(str(operation) for operation in claim.among)
        sql += f" AND c.operation_id IN ({_marks(among)})"
        params.extend(among)
    sql += " ORDER BY o.priority DESC, o.created_at, c.operation_id, c.chunk_index LIMIT 1"
    return sql, params


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


def any_claimable_chunk(claim: ChunkClaim) -> Callable[[sqlite3.Connection], bool]:
    """Whether a chunk could be claimed (a read: a claim that would find none takes no
    write lock from the row writes of every process)."""
    sql, params = _claimable_chunk(claim)

    def read(connection: sqlite3.Connection) -> bool:
        return connection.execute(sql, params).fetchone() is not None

    return read


def claim_chunk(claim: ChunkClaim) -> Callable[[sqlite3.Connection], ChunkRecord | None]:
    """``ChunkStore.claim_chunk`` in one write of the writer thread: pick, claim, read."""
    sql, params = _claimable_chunk(claim)

    def write(connection: sqlite3.Connection) -> ChunkRecord | None:
        found = connection.execute(sql, params).fetchone()
        if found is None:
            return None
        operation_id, index, version, state = found
        resumed = 1 if state == ChunkState.RUNNING.value else 0  # its holder stopped
        values = (
            ChunkState.RUNNING.value,
            claim.worker_id,
            sqlite_timestamp(claim.now),
            resumed,
            operation_id,
            index,
            version,
        )
        if connection.execute(_CLAIM_CHUNK, values).rowcount == 0:
            return None
        row = connection.execute(_CHUNK, (operation_id, index)).fetchone()
        return None if row is None else decode_chunk(row)

    return write


_END_CHUNK = (
    "UPDATE chunks SET state = ?, worker_id = NULL, heartbeat_at = NULL, version = version + 1 "
    "WHERE operation_id = ? AND chunk_index = ? AND worker_id = ? AND state = ?"
)
_CHUNKS_LEFT = "SELECT count(*) FROM chunks WHERE operation_id = ? AND state != ?"


def end_chunk(
    operation_id: UUID, index: int, worker_id: str, done: bool
) -> Callable[[sqlite3.Connection], int | None]:
    """``ChunkStore.end_chunk`` in one write of the writer thread (which holds the whole
    database: the ends of one operation's chunks are serialised)."""
    state = ChunkState.DONE if done else ChunkState.PENDING
    key = str(operation_id)

    def write(connection: sqlite3.Connection) -> int | None:
        values = (state.value, key, index, worker_id, ChunkState.RUNNING.value)
        if connection.execute(_END_CHUNK, values).rowcount == 0:
            return None
        left: int = connection.execute(_CHUNKS_LEFT, (key, ChunkState.DONE.value)).fetchone()[0]
        return left

    return write


class SqliteDialect:
    """The ``Dialect`` of SQLite: a write transaction holds the whole database
    (``BEGIN IMMEDIATE``), so statements need no row or key locks; the hot paths are one
    hop each to the writer (group commit) or reader thread."""

    name = "sqlite"

    def __init__(self, threads: SqliteThreads) -> None:
        self._threads = threads

    def for_update(self, stmt: S) -> S:
        """``stmt`` unchanged."""
        return stmt

    async def lock(self, conn: AsyncConnection, stmt: Select[Any]) -> None:
        """Nothing to run."""

    def skip_locked(self, stmt: S, *, of: Table | None = None) -> S:
        """``stmt`` unchanged."""
        return stmt

    async def serialise(self, conn: AsyncConnection, key: str) -> None:
        """Nothing to wait for."""

    def insert_new(self, table: Table, values: Mapping[str, Any], key: Sequence[str]) -> Insert:
        """``INSERT ... ON CONFLICT (key) DO NOTHING``."""
        return sqlite_insert(table).values(**values).on_conflict_do_nothing(index_elements=key)

    async def insert_events(self, conn: AsyncConnection, events: Sequence[EventRecord]) -> None:
        """Insert events (the writer holds the database until commit)."""
        if events:
            await conn.execute(events_table.insert(), [event_values(e) for e in events])

    async def upsert_rows(
        self, conn: AsyncConnection, operation_id: UUID, rows: Sequence[RowRecord]
    ) -> None:
        """One executemany of the row upsert."""
        await conn.exec_driver_sql(SQLITE_UPSERT, sqlite_rows(operation_id, rows))

    async def save_many(self, writes: Sequence[SplitWrite]) -> list[OperationStatus | None]:
        """``RowStore.save_many`` in one write of the writer thread."""
        return await self._threads.write_sqlite(save_many(writes))

    async def read_batch(
        self, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
    ) -> list[RowRecord]:
        """A keyset batch of row records in one hop."""
        return await self._threads.read_sqlite(read_batch(operation_id, after, limit, states))

    async def read_report_batch(
        self, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
    ) -> list[ReportValues]:
        """A keyset batch of report values in one hop."""
        batch = read_report_batch(operation_id, after, limit, states)
        return await self._threads.read_sqlite(batch)

    async def read_outcome_batch(
        self, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
    ) -> list[RowOutcome]:
        """The row outcomes of ``read_batch``'s rows in one hop."""
        batch = read_outcome_batch(operation_id, after, limit, states)
        return await self._threads.read_sqlite(batch)

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The first row waiting under the key prefix, in one hop."""
        return await self._threads.read_sqlite(find_waiting(operation_id, key_prefix))

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """One write of the writer thread (read and update inside its ``BEGIN IMMEDIATE``)."""
        resolver = resolve_wait(operation_id, row_number, signal_key, outcome)
        return await self._threads.write_sqlite(resolver)

    async def resolve_first_waiting(
        self, operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
    ) -> RowRecord | None:
        """One write of the writer thread."""
        resolver = resolve_first_waiting(operation_id, key_prefix, outcome)
        return await self._threads.write_sqlite(resolver)

    async def claim_chunk(self, claim: ChunkClaim) -> ChunkRecord | None:
        """A look on the reader thread, then (when one is there) one write of the writer
        thread."""
        if not await self._threads.read_sqlite(any_claimable_chunk(claim)):
            return None
        return await self._threads.write_sqlite(claim_chunk(claim))

    async def end_chunk(
        self, operation_id: UUID, index: int, worker_id: str, *, done: bool
    ) -> int | None:
        """One write of the writer thread."""
        return await self._threads.write_sqlite(end_chunk(operation_id, index, worker_id, done))

    async def get_operation(self, operation_id: UUID) -> OperationRecord | None:
        """One hop of the reader thread."""
        return await self._threads.read_sqlite(get_operation(operation_id))

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One hop of the reader thread."""
        return await self._threads.read_sqlite(get_row(operation_id, row_number))
