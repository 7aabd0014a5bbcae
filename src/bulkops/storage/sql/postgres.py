"""PostgreSQL's ``Dialect``: the hot paths at driver level (batch writes with COPY, batch
reads, signal waits), row locks, and transaction locks by key."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple
from uuid import UUID

from sqlalchemy import Engine, Insert, Select, Table, event, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
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
    COPY_MIN_ROWS,
    COPY_TYPES,
    POSTGRES_COPY,
    POSTGRES_MERGE,
    POSTGRES_SPAN_CLEAR,
    POSTGRES_SPAN_UPSERT,
    POSTGRES_STAGING,
    POSTGRES_UPSERT,
    SplitWrite,
    postgres_upsert,
)
from bulkops.storage.sql.chunk_queries import claimable, fetch_chunk, held_by
from bulkops.storage.sql.codec import (
    ROW_VALUE_COLUMNS,
    WAIT_END_COLUMNS,
    event_values,
    operation_from_row,
    outcome_decoder,
    postgres_rows,
    postgres_timestamp,
    report_decoder,
    row_decoder,
    row_from_mapping,
    span_parameters,
    wait_end_values,
)
from bulkops.storage.sql.dialect import ChunkClaim, S, Transactions
from bulkops.storage.sql.schema import NOT_COMPLETED, chunks, operations, row_records
from bulkops.storage.sql.schema import events as events_table
from bulkops.storage.sql.span_reads import (
    driver_rows,
    holding,
    merge,
    span_at_sql,
    span_record,
    spans_after_sql,
    wants_completed,
)
from bulkops.storage.states import TERMINAL_STATUSES, ChunkState, OperationStatus, RowState

STAGED = "bulkops_staging"  # connection info key: the COPY staging table exists
# Key of the advisory lock that orders appends to the event feed (the bytes of "bkevents").
APPEND_LOCK_KEY = int.from_bytes(b"bkevents", "big", signed=True)
_APPEND_LOCK = text("SELECT pg_advisory_xact_lock(:key)")
_KEY_LOCK = text("SELECT pg_advisory_xact_lock(hashtext(:key))")
_ROW_COLUMNS = ", ".join(ROW_VALUE_COLUMNS)
_SPANS_AFTER = spans_after_sql("%s")
_SPAN_AT = span_at_sql("%s")
# Final means final: an operation whose status is final takes no rows, counters or events
# until a retry starts a new round. The update locks the operation row (a cancel waits for
# the commit) and sees its latest status.
_FINAL = [status.value for status in TERMINAL_STATUSES]
_ADD_COUNTERS = (
    "UPDATE operations SET processed_rows = processed_rows + %s, "
    "successful_rows = successful_rows + %s, error_count = error_count + %s "
    "WHERE id = %s AND status <> ALL(%s) RETURNING status"
)
_STATUS_SHARED = "SELECT status FROM operations WHERE id = %s FOR SHARE"
_FINAL_STATUS = "SELECT id, status FROM operations WHERE id = ANY(%s) AND status = ANY(%s)"
_WAITING = RowState.WAITING_FOR_COMPLETION.value
_ADD_STEP = (
    "INSERT INTO completed_steps (operation_id, step_name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
RUNNING_CHUNK = ChunkState.RUNNING.value
_HELD_CHUNK = (
    "SELECT 1 FROM chunks WHERE operation_id = %s AND chunk_index = %s AND worker_id = %s "
    "AND state = %s FOR SHARE"
)


def configure_postgres(engine: Engine) -> None:
    """Give every new PostgreSQL connection the staging table that large row batches are
    copied into (``bulk.POSTGRES_COPY``). A role without the TEMP privilege gets none, and
    its batches are written without COPY."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(POSTGRES_STAGING)
        except Exception:  # insufficient privilege, say: no COPY then
            dbapi_connection.rollback()
        else:
            dbapi_connection.commit()
            record.info[STAGED] = True
        finally:
            cursor.close()


async def _insert_events(conn: AsyncConnection, events: Sequence[EventRecord]) -> None:
    if not events:
        return
    # Identity values are handed out at INSERT but become visible at COMMIT, so concurrent
    # appenders could commit out of order and a reader polling with ``after`` would skip
    # the late, lower sequence for good. Serialising appends (until commit) makes sequence
    # order commit order.
    await conn.execute(_APPEND_LOCK, {"key": APPEND_LOCK_KEY})
    await conn.execute(events_table.insert(), [event_values(e) for e in events])


async def _stage_copies(conn: AsyncConnection, held: list[_Encoded]) -> bool:
    """COPY (binary) the rows of every large write into the session's staging table
    (created with the connection, emptied at every commit or rollback), before the write
    locks anything: the staging table is the session's own. False when the connection has
    none (the rows are then upserted) or no write is large. The last of each row wins, as
    consecutive upserts would leave it (one MERGE cannot update a row twice)."""
    copied = [each for each in held if each.copied]
    if not copied:
        return False
    pooled = await conn.get_raw_connection()
    if not pooled.info.get(STAGED):
        return False
    driver = pooled.driver_connection
    assert driver is not None
    latest = {(values[0], values[1]): values for each in copied for values in each.copied}
    async with driver.cursor() as cursor, cursor.copy(POSTGRES_COPY) as copy:
        copy.set_types(COPY_TYPES)
        for values in latest.values():
            await copy.write_row(values)
    return True


class _Encoded(NamedTuple):
    """One write of ``save_many`` encoded before its transaction opens: its place among
    the writes, the write, its spans' parameters (to clear their rows' records, to store
    them), its rows for COPY (none below ``COPY_MIN_ROWS``) and its counter update with
    parameters."""

    place: int
    write: SplitWrite
    clears: list[Any]
    spans: list[Any]
    copied: list[tuple[Any, ...]]
    add_counters: str
    counters: tuple[object, ...]

    @property
    def lock_order(self) -> tuple[UUID, int, int]:
        """Writes run by operation (then chunk), so that concurrent transactions lock the
        operation rows in the same order and never deadlock."""
        fence = self.write.fence
        chunk = -1 if fence is None or fence.chunk is None else fence.chunk
        return (self.write.operation_id, chunk, self.place)


def _encode(place: int, write: SplitWrite) -> _Encoded:
    operation_id, rows, delta, _, fence = write
    others = rows.others
    clears, spans = span_parameters(operation_id, rows.spans, postgres_timestamp)
    copied = postgres_rows(operation_id, others) if len(others) >= COPY_MIN_ROWS else []
    add_counters = _ADD_COUNTERS
    counters: tuple[object, ...] = (
        delta.processed,
        delta.successful,
        delta.failed,
        operation_id,
        _FINAL,
    )
    if fence is not None and fence.chunk is None:
        add_counters = add_counters.replace("RETURNING", "AND worker_id = %s RETURNING")
        counters += (fence.worker_id,)
    return _Encoded(place, write, clears, spans, copied, add_counters, counters)


async def _driver(conn: AsyncConnection) -> Any:
    """The psycopg connection under ``conn`` (its transaction is the same)."""
    pooled = await conn.get_raw_connection()
    driver = pooled.driver_connection
    assert driver is not None
    return driver


class _NotHeld(Exception):
    """Some writes of a transaction found their operation final or unknown, or their chunk
    not held: the transaction is rolled back and tried again without them."""

    def __init__(self, places: set[int]) -> None:
        super().__init__(f"writes {sorted(places)} not held")
        self.places = places


def _row_statements(held: list[_Encoded], staged: bool) -> list[tuple[str, Any, bool]]:
    """The statements that write the rows and new step names of ``held``, as (SQL,
    parameters, executemany): the spans of them all, the staged rows merged, the others
    upserted."""
    statements: list[tuple[str, Any, bool]] = []
    spans = [values for each in held for values in each.spans]
    if spans:
        clears = [values for each in held for values in each.clears]
        statements.append((POSTGRES_SPAN_CLEAR, clears, True))
        statements.append((POSTGRES_SPAN_UPSERT, spans, True))
    if staged:
        statements.append((POSTGRES_MERGE, None, False))
    for each in held:
        operation_id, rows, _, _, _ = each.write
        if rows.others and not (staged and each.copied):
            upsert, params = postgres_upsert(operation_id, rows.others)
            statements.append((upsert, params, upsert == POSTGRES_UPSERT))
        if rows.new_steps:
            steps = [(operation_id, name) for name in rows.new_steps]
            statements.append((_ADD_STEP, steps, True))
    return statements


async def _lock_and_write(
    driver: Any, held: list[_Encoded], staged: bool
) -> dict[int, OperationStatus]:
    """Add every write's counters (locking its operation row), check its chunk's fence, and
    write the rows and new step names of them all, in one round trip (pipeline mode): the
    operation rows stay locked for that round trip and the commit, never while this process
    runs other work between statements. The status after it of each write, by place;
    raises ``_NotHeld`` when a write's fence does not hold (its rows must not stay)."""
    checks: list[tuple[_Encoded, Any, Any]] = []
    async with driver.pipeline():
        for each in held:  # in lock order: operation rows first, as every writer does
            counters = driver.cursor()
            await counters.execute(each.add_counters, each.counters)
            fence, chunk = each.write.fence, None
            if fence is not None and fence.chunk is not None:
                chunk = driver.cursor()
                owner = (each.write.operation_id, fence.chunk, fence.worker_id, RUNNING_CHUNK)
                await chunk.execute(_HELD_CHUNK, owner)
            checks.append((each, counters, chunk))
        async with driver.cursor() as cursor:
            for sql, params, many in _row_statements(held, staged):
                if many:
                    await cursor.executemany(sql, params)
                else:
                    await cursor.execute(sql, params)
    statuses: dict[int, OperationStatus] = {}
    missed: set[int] = set()
    for each, counters, chunk in checks:
        found = await counters.fetchone()
        if found is None or (chunk is not None and await chunk.fetchone() is None):
            missed.add(each.place)  # unknown, final, or its fence does not hold
        else:
            statuses[each.place] = OperationStatus(found[0])
    if missed:
        raise _NotHeld(missed)
    return statuses


async def _final_statuses(
    driver: Any, missed: list[_Encoded], statuses: dict[int, OperationStatus]
) -> None:
    """The final status of the operations of writes that wrote nothing: the run learns that
    its operation ended (a cancel) rather than only that it wrote nothing. Kept apart from
    ``statuses`` of the writes that hold, whose rows are written."""
    async with driver.cursor() as cursor:
        ids = list({each.write.operation_id for each in missed})
        await cursor.execute(_FINAL_STATUS, (ids, _FINAL))
        final = {found[0]: OperationStatus(found[1]) for found in await cursor.fetchall()}
    for each in missed:
        status = final.get(each.write.operation_id)
        if status is not None:
            statuses[each.place] = status


def _batch_query(
    columns: str, operation_id: UUID, after: int, limit: int, states: Collection[RowState] | None
) -> tuple[str, tuple[object, ...]]:
    sql = f"SELECT {columns} FROM row_records WHERE operation_id = %s AND row_number > %s"
    params: tuple[object, ...] = (operation_id, after)
    if states is not None:
        sql += " AND state = ANY(%s)"
        params += ([state.value for state in states],)
        if RowState.COMPLETED not in states:
            sql += f" AND {NOT_COMPLETED}"  # the partial state index holds them all
    return sql + " ORDER BY row_number LIMIT %s", (*params, limit)


def _first_waiting(operation_id: UUID, key_prefix: str) -> tuple[str, tuple[object, ...]]:
    """The query of the first row waiting under a key prefix, and its parameters."""
    escaped = key_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    # The row number closes the key, so a user key that is a prefix of another ("a" and
    # "a:b") never matches the other's rows.
    sql = (
        f"SELECT {_ROW_COLUMNS} FROM row_records WHERE operation_id = %s AND state = %s "
        "AND signal_key LIKE %s AND signal_key = %s || row_number::text "
        "ORDER BY waiting_since, row_number LIMIT 1"
    )
    return sql, (operation_id, _WAITING, escaped + "%", key_prefix)


def _wait_condition(
    operation_id: UUID, row_number: int, signal_key: str | None
) -> tuple[str, tuple[object, ...]]:
    """The row still waits, under that key (or none, for polling steps)."""
    key_clause = "signal_key IS NULL" if signal_key is None else "signal_key = %s"
    condition = f"operation_id = %s AND row_number = %s AND state = %s AND {key_clause}"
    params: tuple[object, ...] = (operation_id, row_number, _WAITING) + (
        () if signal_key is None else (signal_key,)
    )
    return condition, params


_END_WAIT = ", ".join(f"{name} = %s" for name in WAIT_END_COLUMNS)


async def _end_wait(conn: AsyncConnection, row: RowRecord, outcome: WaitOutcome) -> RowRecord:
    """Store the end of a wait of a row locked in this transaction."""
    resolved = lifecycle.resolve_wait(row, outcome)
    condition, params = _wait_condition(row.operation_id, row.row_number, row.signal_key)
    update = f"UPDATE row_records SET {_END_WAIT} WHERE {condition}"
    await conn.exec_driver_sql(update, wait_end_values(resolved, postgres_timestamp) + params)
    return resolved


async def _final(conn: AsyncConnection, operation_id: UUID) -> bool:
    """The operation's status is final: its waiting rows wait on (final means final). The
    operation row is locked first, as a write of rows locks it, so a cancel waits for the
    wait's end (or the end waits for the cancel) and the two never deadlock."""
    found = (await conn.exec_driver_sql(_STATUS_SHARED, (operation_id,))).first()
    return found is not None and OperationStatus(found[0]).is_terminal


class PostgresDialect:
    """The ``Dialect`` of PostgreSQL: rows are locked where SQLite locks the database."""

    name = "postgresql"

    def __init__(self, db: Transactions) -> None:
        self._db = db

    def for_update(self, stmt: S) -> S:
        """``stmt`` with ``FOR UPDATE``."""
        return stmt.with_for_update()

    async def lock(self, conn: AsyncConnection, stmt: Select[Any]) -> None:
        """Run ``stmt`` with ``FOR UPDATE``."""
        await conn.execute(stmt.with_for_update())

    def skip_locked(self, stmt: S, *, of: Table | None = None) -> S:
        """``stmt`` with ``FOR UPDATE [OF table] SKIP LOCKED``."""
        return stmt.with_for_update(of=of, skip_locked=True)

    async def serialise(self, conn: AsyncConnection, key: str) -> None:
        """A transaction-scoped advisory lock on the hash of ``key``."""
        await conn.execute(_KEY_LOCK, {"key": key})

    def insert_new(self, table: Table, values: Mapping[str, Any], key: Sequence[str]) -> Insert:
        """``INSERT ... ON CONFLICT (key) DO NOTHING``."""
        return postgres_insert(table).values(**values).on_conflict_do_nothing(index_elements=key)

    async def insert_events(self, conn: AsyncConnection, events: Sequence[EventRecord]) -> None:
        """Insert events under the append lock (held until commit)."""
        await _insert_events(conn, events)

    async def upsert_rows(
        self, conn: AsyncConnection, operation_id: UUID, rows: Sequence[RowRecord]
    ) -> None:
        """One executemany of the row upsert."""
        await conn.exec_driver_sql(POSTGRES_UPSERT, postgres_rows(operation_id, rows))

    async def save_many(self, writes: Sequence[SplitWrite]) -> list[OperationStatus | None]:
        """``RowStore.save_many`` in one transaction (events are written when given): the
        writes run by operation, each locking its operation row first, as every writer
        does, all in one round trip; the events of those written are appended last, under
        one append lock. A write whose fence does not hold is left out: the transaction is
        rolled back and tried again without it (rare: a cancel, a chunk taken back)."""
        # Encode before the transaction so the locks are held for the SQL alone.
        encoded = sorted(
            (_encode(place, write) for place, write in enumerate(writes)),
            key=lambda each: each.lock_order,
        )
        left_out: set[int] = set()
        found: dict[int, OperationStatus] = {}
        while True:
            held = [each for each in encoded if each.place not in left_out]
            try:
                async with self._db.write() as conn:
                    driver = await _driver(conn)
                    if held:
                        staged = await _stage_copies(conn, held)
                        found = await _lock_and_write(driver, held, staged)
                        places = sorted(each.place for each in held)  # the writes' order
                        events = [e for place in places for e in writes[place].events]
                        await _insert_events(conn, events)
                    missed = [each for each in encoded if each.place in left_out]
                    if missed:
                        await _final_statuses(driver, missed, found)
            except _NotHeld as exc:
                left_out |= exc.places
                continue
            break
        return [found.get(place) for place in range(len(writes))]

    async def _read_rows(
        self,
        columns: Sequence[str],
        operation_id: UUID,
        after: int,
        limit: int,
        states: Collection[RowState] | None,
    ) -> Sequence[Any]:
        """The driver values (in ``columns`` order) of the next ``limit`` rows above row
        ``after`` (in ``states`` when given), by row number: stored, or in spans."""
        sql, params = _batch_query(", ".join(columns), operation_id, after, limit, states)
        async with self._db.read() as conn:
            found = (await conn.exec_driver_sql(sql, params)).all()
            if not wants_completed(states):
                return found
            spans = (await conn.exec_driver_sql(_SPANS_AFTER, (operation_id, after, limit))).all()
        return merge(found, spans, after, limit, driver_rows(columns)) if spans else found

    async def read_batch(
        self,
        operation_id: UUID,
        after: int,
        limit: int,
        states: Collection[RowState] | None,
    ) -> list[RowRecord]:
        """The next ``limit`` row records above row ``after`` (in ``states`` when given)."""
        found = await self._read_rows(ROW_VALUE_COLUMNS, operation_id, after, limit, states)
        return list(map(row_decoder(operation_id), found))

    async def read_report_batch(
        self,
        operation_id: UUID,
        after: int,
        limit: int,
        states: Collection[RowState] | None,
    ) -> list[ReportValues]:
        """The report values of ``read_batch``'s rows."""
        found = await self._read_rows(REPORT_FIELDS, operation_id, after, limit, states)
        return list(map(report_decoder(), found))

    async def read_outcome_batch(
        self,
        operation_id: UUID,
        after: int,
        limit: int,
        states: Collection[RowState] | None,
    ) -> list[RowOutcome]:
        """The row outcomes of ``read_batch``'s rows."""
        found = await self._read_rows(OUTCOME_FIELDS, operation_id, after, limit, states)
        return list(map(outcome_decoder(), found))

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """``RowStore.find_waiting``: the first row waiting under the key prefix."""
        sql, params = _first_waiting(operation_id, key_prefix)
        async with self._db.read() as conn:
            found = (await conn.exec_driver_sql(sql, params)).first()
        return None if found is None else row_decoder(operation_id)(found)

    async def resolve_wait(
        self,
        operation_id: UUID,
        row_number: int,
        signal_key: str | None,
        outcome: WaitOutcome,
    ) -> RowRecord | None:
        """``RowStore.resolve_wait``: the row is locked between the read and the update."""
        condition, params = _wait_condition(operation_id, row_number, signal_key)
        lookup = f"SELECT {_ROW_COLUMNS} FROM row_records WHERE {condition} FOR UPDATE"
        async with self._db.write() as conn:
            if await _final(conn, operation_id):
                return None
            found = (await conn.exec_driver_sql(lookup, params)).first()
            if found is None:
                return None
            return await _end_wait(conn, row_decoder(operation_id)(found), outcome)

    async def resolve_first_waiting(
        self,
        operation_id: UUID,
        key_prefix: str,
        outcome: Callable[[RowRecord], WaitOutcome],
    ) -> RowRecord | None:
        """``RowStore.resolve_first_waiting``: the first waiting row that no concurrent signal
        holds is locked, then ended, in one transaction."""
        sql, params = _first_waiting(operation_id, key_prefix)
        async with self._db.write() as conn:
            if await _final(conn, operation_id):
                return None
            found = (await conn.exec_driver_sql(sql + " FOR UPDATE SKIP LOCKED", params)).first()
            if found is None:
                return None
            row = row_decoder(operation_id)(found)
            return await _end_wait(conn, row, outcome(row))

    async def claim_chunk(self, claim: ChunkClaim) -> ChunkRecord | None:
        """The pick skips chunks another transaction holds (``SKIP LOCKED``), so claimers
        at once take different chunks."""
        c, o = chunks.c, operations.c
        conditions = claimable(claim.names, claim.stale_before, claim.alive, claim.alive_before)
        if claim.exclude:
            conditions.append(c.operation_id.not_in(sorted(claim.exclude)))
        if claim.among is not None:
            conditions.append(c.operation_id.in_(sorted(claim.among)))
        pick = (
            select(c.operation_id, c.chunk_index, c.version, c.state)
            .join(operations, o.id == c.operation_id)
            .where(*conditions)
            .order_by(o.priority.desc(), o.created_at, c.operation_id, c.chunk_index)
            .limit(1)
            .with_for_update(skip_locked=True, of=chunks)
        )
        async with self._db.write() as conn:
            found = (await conn.execute(pick)).first()
            if found is None:
                return None
            operation_id, index, version, state = found
            resumed = 1 if state == ChunkState.RUNNING else 0  # its holder stopped
            claimed = (
                update(chunks)
                .where(
                    c.operation_id == operation_id,
                    c.chunk_index == index,
                    c.version == version,
                )
                .values(
                    state=ChunkState.RUNNING,
                    worker_id=claim.worker_id,
                    heartbeat_at=claim.now,
                    version=c.version + 1,
                    resume_count=c.resume_count + resumed,
                )
            )
            if (await conn.execute(claimed)).rowcount == 0:
                return None
            return await fetch_chunk(conn, operation_id, index)

    async def end_chunk(
        self, operation_id: UUID, index: int, worker_id: str, *, done: bool
    ) -> int | None:
        """The operation's row locked first: its chunks' ends wait for each other."""
        c, o = chunks.c, operations.c
        state = ChunkState.DONE if done else ChunkState.PENDING
        end = (
            update(chunks)
            .where(*held_by(operation_id, index, worker_id))
            .values(state=state, worker_id=None, heartbeat_at=None, version=c.version + 1)
        )
        left = (
            select(func.count())
            .select_from(chunks)
            .where(c.operation_id == operation_id, c.state != ChunkState.DONE)
        )
        async with self._db.write() as conn:
            await conn.execute(select(o.id).where(o.id == operation_id).with_for_update())
            if (await conn.execute(end)).rowcount == 0:
                return None
            return int((await conn.execute(left)).scalar_one())

    async def get_operation(self, operation_id: UUID) -> OperationRecord | None:
        """The operation record through the column types."""
        async with self._db.read() as conn:
            found = await conn.execute(select(operations).where(operations.c.id == operation_id))
            row = found.mappings().one_or_none()
        return None if row is None else operation_from_row(row)

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """The row record through the column types: stored, or in a span."""
        r = row_records.c
        stmt = select(row_records).where(r.operation_id == operation_id, r.row_number == row_number)
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
            if row is not None:
                return row_from_mapping(row)
            at = await conn.exec_driver_sql(_SPAN_AT, (operation_id, row_number))
            span = holding(at.first(), row_number)
        return None if span is None else span_record(operation_id, span, row_number)
