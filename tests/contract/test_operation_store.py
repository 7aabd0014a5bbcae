"""OperationStore contract: the same behaviour on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from bulkops.errors import StorageError
from bulkops.storage import lifecycle
from bulkops.storage.records import (
    OperationQuery,
    OperationRecord,
    ProgressDelta,
    RowQuery,
    RowRecord,
)
from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
from bulkops.storage.sql.database import parse_url
from bulkops.storage.sql.migrate import alembic_config
from bulkops.storage.sql.schema import metadata
from bulkops.storage.states import EventType, OperationStatus, RowState, Severity

if TYPE_CHECKING:
    from tests.contract.conftest import Stores

MakeOperation = Callable[..., OperationRecord]
MakeRow = Callable[..., RowRecord]
BASE_TIME = datetime(2024, 6, 1, 12, 0, 0, 654321, tzinfo=UTC)
LATER = BASE_TIME + timedelta(hours=1)


def _fully_populated(make_operation: MakeOperation) -> OperationRecord:
    return make_operation(
        status=OperationStatus.RUNNING,
        notifications={"webhook": {"url": "https://example.com/hook", "events": ["Completed"]}},
        started_at=BASE_TIME + timedelta(seconds=1),
        completed_at=BASE_TIME + timedelta(seconds=2, microseconds=7),
        total_rows=1_000_000,
        processed_rows=10,
        successful_rows=7,
        error_count=3,
        retry_count=2,
        error_message="something ünïcode went wrong",
        version=5,
        worker_id="worker-1",
        heartbeat_at=BASE_TIME + timedelta(seconds=3),
        resume_count=3,
        file_size=5 * 1024**3,
        file_format="xlsx",
        sheet="People ünïcode",
    )


async def test_add_then_get_round_trips_every_field(
    stores: Stores, make_operation: MakeOperation
) -> None:
    full, minimal = _fully_populated(make_operation), make_operation()
    await stores.operations.add(full)
    await stores.operations.add(minimal)

    assert await stores.operations.get(full.id) == full
    assert await stores.operations.get(minimal.id) == minimal
    got = await stores.operations.get(full.id)
    assert got is not None and got.created_at.tzinfo is not None
    assert got.created_at.utcoffset() == timedelta(0)
    assert isinstance(got.id, uuid.UUID) and got.status is OperationStatus.RUNNING


async def test_get_unknown_is_none(stores: Stores) -> None:
    assert await stores.operations.get(uuid.uuid4()) is None


async def test_add_duplicate_id_raises_storage_error(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation()
    await stores.operations.add(record)
    with pytest.raises(StorageError):
        await stores.operations.add(record)


async def test_returned_records_are_copies(stores: Stores, make_operation: MakeOperation) -> None:
    record = make_operation()
    await stores.operations.add(record)
    record.metadata["tags"].append("mutated-after-add")
    got = await stores.operations.get(record.id)
    assert got is not None
    got.metadata["nested"]["x"] = "mutated-after-get"
    again = await stores.operations.get(record.id)
    assert again is not None
    assert again.metadata == {"dryRun": False, "tags": ["a", "b"], "nested": {"x": 1.5}}


async def test_ping(stores: Stores) -> None:
    await stores.operations.ping()


async def test_list_orders_newest_first_then_by_id(
    stores: Stores, make_operation: MakeOperation
) -> None:
    older, newer = make_operation(), make_operation()
    tied = [make_operation(created_at=LATER) for _ in range(4)]
    for record in [older, *tied, newer]:
        await stores.operations.add(record)

    page = await stores.operations.list(OperationQuery(page_size=10))

    expected = [*sorted(tied, key=lambda r: r.id), newer, older]
    assert [r.id for r in page.items] == [r.id for r in expected]
    assert page.total_count == 6 and not page.has_next_page


async def test_list_pages(stores: Stores, make_operation: MakeOperation) -> None:
    records = [make_operation() for _ in range(7)]
    for record in records:
        await stores.operations.add(record)
    newest_first = [r.id for r in reversed(records)]

    first = await stores.operations.list(OperationQuery(page=1, page_size=3))
    third = await stores.operations.list(OperationQuery(page=3, page_size=3))
    beyond = await stores.operations.list(OperationQuery(page=4, page_size=3))

    assert [r.id for r in first.items] == newest_first[:3]
    assert first.total_count == 7 and first.has_next_page
    assert (first.page, first.page_size) == (1, 3)
    assert [r.id for r in third.items] == newest_first[6:]
    assert not third.has_next_page
    assert beyond.items == [] and beyond.total_count == 7


@pytest.mark.parametrize(("page", "page_size"), [(0, 10), (1, 0), (-1, 5)])
async def test_list_refuses_impossible_paging(stores: Stores, page: int, page_size: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await stores.operations.list(OperationQuery(page=page, page_size=page_size))


async def test_list_filters(stores: Stores, make_operation: MakeOperation) -> None:
    a = make_operation(operation_name="Import-Users", created_by="Alice@Example.com")
    b = make_operation(operation_name="import-users-v2", status=OperationStatus.RUNNING)
    c = make_operation(operation_name="export", created_by="bob")
    d = make_operation(operation_name="IMPORT-USERS", status=OperationStatus.FAILED)
    for record in (a, b, c, d):
        await stores.operations.add(record)

    async def ids(**filters: object) -> set[uuid.UUID]:
        page = await stores.operations.list(OperationQuery(page_size=50, **filters))  # type: ignore[arg-type]
        assert page.total_count == len(page.items)
        return {r.id for r in page.items}

    assert await ids(operation_name="import-USERS") == {a.id, d.id}  # exact, any case
    assert await ids(operation_name="import") == set()  # no prefix match
    assert await ids(created_by="ALICE@example.COM") == {a.id, b.id, d.id}
    assert await ids(status=OperationStatus.RUNNING) == {b.id}
    assert await ids(status=OperationStatus.FAILED, operation_name="import-users") == {d.id}
    # created_from / created_to are inclusive
    assert await ids(created_from=b.created_at) == {b.id, c.id, d.id}
    assert await ids(created_to=b.created_at) == {a.id, b.id}
    assert await ids(created_from=b.created_at, created_to=c.created_at) == {b.id, c.id}
    assert await ids(created_from=d.created_at + timedelta(microseconds=1)) == set()


async def test_claimable_returns_pending_and_unheld_retrying_oldest_first(
    stores: Stores, make_operation: MakeOperation
) -> None:
    records = [
        make_operation(status=OperationStatus.RETRYING),
        make_operation(status=OperationStatus.RUNNING, worker_id="w"),
        make_operation(status=OperationStatus.PENDING),
        make_operation(status=OperationStatus.COMPLETED),
        make_operation(status=OperationStatus.RETRYING, worker_id="w", heartbeat_at=BASE_TIME),
        make_operation(status=OperationStatus.PENDING),
        make_operation(status=OperationStatus.CANCELLED),
    ]
    for record in reversed(records):
        await stores.operations.add(record)

    found = await stores.operations.claimable(10)
    assert [r.id for r in found] == [records[0].id, records[2].id, records[5].id]
    assert [r.id for r in await stores.operations.claimable(2)] == [records[0].id, records[2].id]
    assert await stores.operations.claimable(0) == []


async def test_apply_persists_a_claim_and_its_event(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(version=4)
    await stores.operations.add(record, [lifecycle.created_event(record, BASE_TIME)])
    change = lifecycle.claim(record, "worker-a", LATER)

    claimed = await stores.operations.apply(change)

    assert claimed == change.record
    assert claimed.status is OperationStatus.RUNNING
    assert (claimed.version, claimed.worker_id) == (5, "worker-a")
    assert claimed.heartbeat_at == LATER and claimed.started_at == LATER
    assert await stores.operations.get(record.id) == claimed
    events = await stores.events.read(after=0, limit=10, operation_id=record.id)
    assert [(e.type, e.message) for e in events] == [
        (EventType.CREATED, "Created by alice@example.com from users.csv (1234 bytes)"),
        (EventType.STATUS_CHANGED, "Status changed from Pending to Running"),
    ]


async def test_apply_sets_only_the_changed_fields(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    record = make_operation(status=OperationStatus.RUNNING, worker_id="w", heartbeat_at=BASE_TIME)
    await stores.operations.add(record)
    cancel = lifecycle.cancel(record, LATER)  # computed before the rows below were saved
    rows = [make_row(record.id, 1), make_row(record.id, 2)]
    await stores.rows.save(record.id, rows, ProgressDelta(2, 2, 0))
    await stores.operations.heartbeat([record.id], "w", LATER)

    cancelled = await stores.operations.apply(cancel)

    assert cancelled is not None and cancelled.status is OperationStatus.CANCELLED
    assert cancelled.completed_at == LATER and cancelled.version == record.version + 1
    # Counters and heartbeat written meanwhile by others are kept, not overwritten.
    assert (cancelled.processed_rows, cancelled.heartbeat_at) == (2, LATER)


async def test_apply_refuses_a_stale_token_and_unknown_ids(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(version=2)
    await stores.operations.add(record)
    stale = lifecycle.claim(replace(record, version=1), "w", LATER)

    assert await stores.operations.apply(stale) is None
    assert await stores.operations.apply(lifecycle.claim(make_operation(), "w", LATER)) is None
    assert await stores.operations.get(record.id) == record
    assert await stores.events.read(after=0, limit=10) == []


async def test_concurrent_changes_of_one_version_have_one_winner(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation()
    await stores.operations.add(record)

    results = await asyncio.gather(
        *(stores.operations.apply(lifecycle.claim(record, f"w-{i}", LATER)) for i in range(6))
    )

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    stored = await stores.operations.get(record.id)
    assert stored is not None and stored.version == 1
    assert stored.worker_id == winners[0].worker_id
    assert len(await stores.events.read(after=0, limit=10)) == 1  # the winner's event only


async def test_terminal_changes_set_completed_at_message_and_counters(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(status=OperationStatus.RUNNING, worker_id="w", started_at=BASE_TIME)
    await stores.operations.add(record)

    failed = await stores.operations.apply(
        lifecycle.fail(record, "file unreadable", LATER, lifecycle.RowCounts(3, 1))
    )

    assert failed is not None and failed.status is OperationStatus.FAILED
    assert failed.completed_at == LATER and failed.error_message == "file unreadable"
    assert (failed.processed_rows, failed.successful_rows, failed.error_count) == (4, 3, 1)
    (event,) = await stores.events.read(after=0, limit=10)
    assert (event.type, event.severity) == (EventType.FAILED, Severity.ERROR)
    assert event.message == "Operation failed: file unreadable"


async def test_release_hands_the_operation_back(
    stores: Stores, make_operation: MakeOperation
) -> None:
    running = make_operation(
        status=OperationStatus.RUNNING, worker_id="w", heartbeat_at=BASE_TIME, started_at=BASE_TIME
    )
    retrying = make_operation(status=OperationStatus.RETRYING, worker_id="w", heartbeat_at=LATER)
    for record in (running, retrying):
        await stores.operations.add(record)

    pending = await stores.operations.apply(lifecycle.release(running, LATER))
    unheld = await stores.operations.apply(lifecycle.release(retrying, LATER))

    assert pending is not None and pending.status is OperationStatus.PENDING
    assert (pending.worker_id, pending.heartbeat_at, pending.started_at) == (None, None, BASE_TIME)
    assert unheld is not None and unheld.status is OperationStatus.RETRYING
    assert unheld.worker_id is None
    assert {r.id for r in await stores.operations.claimable(10)} == {running.id, retrying.id}


async def test_abandoned_lists_held_operations_with_stale_heartbeats(
    stores: Stores, make_operation: MakeOperation
) -> None:
    old, older = BASE_TIME, BASE_TIME - timedelta(minutes=1)
    records = [
        make_operation(status=OperationStatus.RUNNING, worker_id="a", heartbeat_at=old),
        make_operation(status=OperationStatus.RETRYING, worker_id="b", heartbeat_at=older),
        make_operation(status=OperationStatus.RUNNING, worker_id="c", heartbeat_at=LATER),
        make_operation(status=OperationStatus.RETRYING),  # nobody holds it: claimable instead
        make_operation(status=OperationStatus.CANCELLED, worker_id="d", heartbeat_at=old),
    ]
    for record in records:
        await stores.operations.add(record)

    found = await stores.operations.abandoned(BASE_TIME + timedelta(seconds=1), 10)

    assert [r.id for r in found] == [records[1].id, records[0].id]
    assert len(await stores.operations.abandoned(LATER + timedelta(seconds=1), 1)) == 1


async def test_take_over_moves_the_holder_and_recounts(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(
        status=OperationStatus.RUNNING, worker_id="gone", heartbeat_at=BASE_TIME, processed_rows=9
    )
    await stores.operations.add(record)

    taken = await stores.operations.apply(
        lifecycle.take_over(record, "new", lifecycle.RowCounts(2, 1), LATER)
    )

    assert taken is not None and taken.status is OperationStatus.RUNNING
    assert (taken.worker_id, taken.heartbeat_at, taken.resume_count) == ("new", LATER, 1)
    assert (taken.processed_rows, taken.successful_rows, taken.error_count) == (3, 2, 1)
    (event,) = await stores.events.read(after=0, limit=10)
    assert event.severity is Severity.WARNING and "resumed" in event.message


async def test_set_total_rows(stores: Stores, make_operation: MakeOperation) -> None:
    record = make_operation()
    await stores.operations.add(record)

    await stores.operations.set_total_rows(record.id, 42)
    await stores.operations.set_total_rows(uuid.uuid4(), 1)  # unknown: ignored

    got = await stores.operations.get(record.id)
    assert got is not None and got.total_rows == 42 and got.version == record.version


async def test_heartbeat_renews_only_this_workers_held_operations(
    stores: Stores, make_operation: MakeOperation
) -> None:
    running = make_operation(status=OperationStatus.RUNNING, worker_id="w1", heartbeat_at=BASE_TIME)
    retrying = make_operation(
        status=OperationStatus.RETRYING, worker_id="w1", heartbeat_at=BASE_TIME
    )
    other = make_operation(status=OperationStatus.RUNNING, worker_id="w2", heartbeat_at=BASE_TIME)
    # Cancelled while held: a late heartbeat must not touch it.
    cancelled = make_operation(
        status=OperationStatus.CANCELLED, worker_id="w1", heartbeat_at=BASE_TIME
    )
    for record in (running, retrying, other, cancelled):
        await stores.operations.add(record)

    ids = [running.id, retrying.id, other.id, cancelled.id, uuid.uuid4()]
    await stores.operations.heartbeat(ids, "w1", LATER)
    await stores.operations.heartbeat([], "w1", LATER)

    assert await stores.operations.get(running.id) == replace(running, heartbeat_at=LATER)
    assert await stores.operations.get(retrying.id) == replace(retrying, heartbeat_at=LATER)
    assert await stores.operations.get(other.id) == other
    assert await stores.operations.get(cancelled.id) == cancelled


async def test_running_lists_every_running_operation(
    stores: Stores, make_operation: MakeOperation
) -> None:
    records = [
        make_operation(status=status)
        for status in (OperationStatus.RUNNING, OperationStatus.PENDING, OperationStatus.RUNNING)
    ]
    for record in records:
        await stores.operations.add(record)

    assert {r.id for r in await stores.operations.running()} == {records[0].id, records[2].id}


async def test_counts_come_from_row_states(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    record = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(record)
    assert await stores.operations.counts(record.id) == lifecycle.RowCounts(0, 0)
    states = [RowState.COMPLETED] * 3 + [RowState.FAILED] * 2
    states += [RowState.PENDING, RowState.RUNNING, RowState.WAITING_FOR_COMPLETION]
    rows = [make_row(record.id, n, state=s) for n, s in enumerate(states, start=1)]
    # A wrong delta, as after a crash between flushes: counts ignore the counters.
    await stores.rows.save(record.id, rows, ProgressDelta(processed=99, successful=1, failed=50))

    assert await stores.operations.counts(record.id) == lifecycle.RowCounts(3, 2)
    assert await stores.operations.counts(uuid.uuid4()) == lifecycle.RowCounts(0, 0)
    assert await stores.operations.failed_rows(record.id) == 2
    assert await stores.operations.failed_rows(uuid.uuid4()) == 0


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_change_whose_event_fails_is_not_stored(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, make_operation: MakeOperation
) -> None:
    """A crash between a status change and its event cannot lose the event: both are one
    transaction, so a failure while writing the event leaves the status unchanged."""
    url = f"sqlite:///{tmp_path}/db.sqlite"
    if kind == "postgres":
        url = request.getfixturevalue("empty_postgres_url")
    else:
        migrate(url)
    database = Database.from_url(url)
    store, events = SqlStore(database), SqlEventStore(database)
    try:
        record = make_operation(status=OperationStatus.RUNNING, worker_id="w")
        await store.add(record)
        change = lifecycle.cancel(record, LATER)
        broken = replace(change, events=(replace(change.events[0], message=None),))

        with pytest.raises(StorageError):
            await store.apply(broken)

        assert await store.get(record.id) == record
        assert await events.read(after=0, limit=10) == []
        assert await store.apply(change) is not None  # the intact change goes through
        assert [e.type for e in await events.read(after=0, limit=10)] == [EventType.CANCELLED]
    finally:
        await database.close()


# SQL adapters: migrations, URLs and error translation. -----------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An unmigrated SQLite file in a directory that does not exist yet, or the session's
    (already migrated) PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/not/yet/bulkops.db"
    return str(request.getfixturevalue("migrated_postgres_url"))


def test_migrate_is_idempotent_and_head_matches_the_schema(sql_url: str) -> None:
    migrate(sql_url)
    migrate(sql_url)

    engine = create_engine(parse_url(sql_url, asynchronous=False))
    try:
        with engine.connect() as conn:
            # SQLite cannot reflect identity columns, so defaults are compared on PostgreSQL.
            opts = {"compare_type": True, "compare_server_default": engine.name == "postgresql"}
            context = MigrationContext.configure(conn, opts=opts)
            assert compare_metadata(context, metadata) == []
            head = ScriptDirectory.from_config(alembic_config()).get_current_head()
            assert context.get_current_revision() == head
    finally:
        engine.dispose()


def test_the_state_index_leaves_completed_rows_out(sql_url: str) -> None:
    migrate(sql_url)
    engine = create_engine(parse_url(sql_url, asynchronous=False))
    name = "ix_row_records_operation_id_state_row_number"
    try:
        with engine.connect() as conn:
            if engine.name == "sqlite":
                query = text("SELECT sql FROM sqlite_master WHERE name = :name")
            else:
                query = text("SELECT indexdef FROM pg_indexes WHERE indexname = :name")
            definition = str(conn.execute(query, {"name": name}).scalar_one())
    finally:
        engine.dispose()
    assert "WHERE" in definition.upper() and "Completed" in definition, definition


def test_stored_rows_survive_the_row_records_rebuild_of_0008_both_ways(
    tmp_path: Path, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    url = f"sqlite:///{tmp_path}/bulkops.db"
    migrate(url)
    op = make_operation()
    rows = [make_row(op.id, n) for n in range(1, 4)]
    rows[1] = make_row(op.id, 2, state=RowState.FAILED, row_data={"a": 1}, error_message="x")

    async def store(action: Callable[[SqlStore], Any]) -> Any:
        database = Database.from_url(url)
        try:
            return await action(SqlStore(database))
        finally:
            await database.close()

    async def save(rows_store: SqlStore) -> None:
        await rows_store.add(op)
        await rows_store.save(op.id, rows, ProgressDelta(3, 2, 1))

    async def read(rows_store: SqlStore) -> list[RowRecord | None]:
        return [await rows_store.get_row(op.id, n) for n in range(1, 4)]

    asyncio.run(store(save))
    engine = create_engine(parse_url(url, asynchronous=False))
    try:
        with engine.begin() as conn:  # back to the foreign key: the table is rebuilt
            command.downgrade(alembic_config(conn), "0007")
        assert asyncio.run(store(read)) == rows
        with engine.begin() as conn:  # and rebuilt again without it
            command.upgrade(alembic_config(conn), "head")
        assert asyncio.run(store(read)) == rows
    finally:
        engine.dispose()


def test_the_upgrade_lists_the_steps_of_completed_rows_stored_before_it(
    tmp_path: Path, make_operation: MakeOperation
) -> None:
    """0010 fills ``completed_steps`` from the rows already stored, so a step filter on an
    operation stored before the upgrade still finds its Completed rows."""
    url = f"sqlite:///{tmp_path}/bulkops.db"
    op = make_operation(status=OperationStatus.COMPLETED)
    engine = create_engine(parse_url(url, asynchronous=False))
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0009")
            insert = text(
                "INSERT INTO row_records (operation_id, row_number, state, step_index, "
                "step_name, retry_attempt) VALUES (:op, :n, :state, 0, :step, 0)"
            )
            for n, state, step in [
                (1, "Completed", "ship"),
                (2, "Failed", "validation"),
                (3, "Completed", "ship"),
                (4, "Completed", None),
            ]:
                conn.execute(insert, {"op": str(op.id), "n": n, "state": state, "step": step})
        migrate(url)
    finally:
        engine.dispose()

    async def pages() -> list[list[int]]:
        database = Database.from_url(url)
        try:
            store = SqlStore(database)
            await store.add(op)
            found = []
            for step in ("ship", "validation", "process"):
                page = await store.page(RowQuery(op.id, step_name=step))
                found.append([row.row_number for row in page.items])
            return found
        finally:
            await database.close()

    assert asyncio.run(pages()) == [[1, 3], [2], []]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of its own: a SQLite file, or a PostgreSQL database created for
    this test (migrations go down and up on it, which the session's database must not
    see) and dropped after it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/bulkops.db"
        return
    import psycopg

    admin = request.getfixturevalue("postgres_url")
    name = f"bulkops_migration_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_0014_moves_the_worksheet_out_of_the_notification_options_and_back(
    fresh_sql_url: str, make_operation: MakeOperation
) -> None:
    """Before 0014 a worksheet named at create sat under a "sheet" key of
    ``notifications``; the upgrade moves it to ``operations.sheet`` (options left empty
    become NULL), the downgrade puts it back, and operations without one are untouched."""
    hook = {"webhook": {"url": "https://example.com/hook"}}
    sheet_only, with_options, without = (make_operation() for _ in range(3))
    stored = {
        sheet_only.id: {"sheet": "People"},
        with_options.id: {**hook, "sheet": "Q4 ünïcode"},
        without.id: hook,
    }
    engine = create_engine(parse_url(fresh_sql_url, asynchronous=False))
    select = text("SELECT id, notifications FROM operations ORDER BY created_at")
    as_json = "CAST(:notifications AS JSONB)" if engine.name == "postgresql" else ":notifications"
    insert = text(
        "INSERT INTO operations (id, operation_name, status, created_by, created_at, source, "
        "file_id, file_name, file_size, file_format, metadata, notifications) VALUES (:id, "
        f"'import-users', 'Completed', 'alice', :created_at, 'api', :file_id, 'b.xlsx', 1, "
        f"'xlsx', '{{}}', {as_json})"
    )

    def options() -> list[Any]:
        with engine.connect() as conn:
            found = conn.execute(select).all()
        return [json.loads(value) if isinstance(value, str) else value for _, value in found]

    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0013")
            for n, (operation_id, notifications) in enumerate(stored.items()):
                created = (BASE_TIME + timedelta(seconds=n)).replace(tzinfo=None).isoformat(" ")
                values = {"notifications": json.dumps(notifications), "file_id": f"f{n}"}
                conn.execute(insert, {**values, "id": str(operation_id), "created_at": created})
        migrate(fresh_sql_url)

        assert options() == [None, hook, hook]

        async def sheets() -> list[str | None]:
            database = Database.from_url(fresh_sql_url)
            try:
                store = SqlStore(database)
                found = [await store.get(operation_id) for operation_id in stored]
                return [record.sheet if record else "missing" for record in found]
            finally:
                await database.close()

        assert asyncio.run(sheets()) == ["People", "Q4 ünïcode", None]
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0013")
        assert options() == list(stored.values())
    finally:
        engine.dispose()


def test_migrate_resolves_relative_sqlite_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    migrate("sqlite:///data/bulkops.db")
    assert (tmp_path / "data" / "bulkops.db").is_file()


@pytest.mark.parametrize(
    "url",
    ["mysql://root@localhost/db", "sqlite://", "sqlite:///:memory:", "not a url", "oracle://x"],
)
def test_unsupported_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"URL|in-memory"):
        Database.from_url(url)
    with pytest.raises(ValueError, match=r"URL|in-memory"):
        migrate(url)


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@h/db", "postgresql+psycopg://u@h:5433/db", "postgres://u:secret@h/db"],
)
async def test_postgres_url_spellings_select_psycopg(url: str) -> None:
    database = Database.from_url(url)  # connects lazily
    assert database.dialect.name == "postgresql"
    assert parse_url(url, asynchronous=True).drivername == "postgresql+psycopg"
    await database.close()


async def test_a_closed_database_raises_storage_error(sql_url: str) -> None:
    migrate(sql_url)
    database = Database.from_url(sql_url)
    store, events = SqlStore(database), SqlEventStore(database)
    await store.ping()
    await database.close()
    await database.close()  # idempotent

    with pytest.raises(StorageError, match="closed"):
        await store.get(uuid.uuid4())
    with pytest.raises(StorageError, match="closed"):
        await events.read(after=None, limit=1)


async def _join_aiosqlite_threads() -> None:
    workers = [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]
    for worker in workers:
        await asyncio.to_thread(worker.join, 10)
    await asyncio.sleep(0)  # run the callbacks the threads posted


async def test_unreachable_databases_raise_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for url in (f"sqlite:///{blocker}/bulkops.db", "postgresql://postgres@127.0.0.1:1/none"):
        database = Database.from_url(url)
        with pytest.raises(StorageError):
            await SqlStore(database).ping()
        await database.close()
    # A failed aiosqlite connect stops its worker thread through this loop: let the thread
    # finish while the loop is alive, or it reports "Event loop is closed" in a later test.
    await _join_aiosqlite_threads()
    with pytest.raises(StorageError):
        migrate("postgresql://postgres@127.0.0.1:1/none")
    with pytest.raises(StorageError):
        migrate(f"sqlite:///{blocker}/bulkops.db")
