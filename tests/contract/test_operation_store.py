"""OperationStore contract: the same behaviour on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from bulkops.errors import StorageError
from bulkops.storage.records import OperationQuery, OperationRecord, ProgressDelta, RowRecord
from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
from bulkops.storage.sql.database import parse_url
from bulkops.storage.sql.migrate import alembic_config
from bulkops.storage.sql.schema import metadata
from bulkops.storage.states import OperationStatus, RowState, can_transition

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
        file_size=5 * 1024**3,
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


async def test_claimable_returns_pending_and_retrying_oldest_first(
    stores: Stores, make_operation: MakeOperation
) -> None:
    statuses = [
        OperationStatus.RETRYING,
        OperationStatus.RUNNING,
        OperationStatus.PENDING,
        OperationStatus.COMPLETED,
        OperationStatus.PENDING,
        OperationStatus.CANCELLED,
    ]
    records = [make_operation(status=status) for status in statuses]
    for record in reversed(records):
        await stores.operations.add(record)

    found = await stores.operations.claimable(10)
    assert [r.id for r in found] == [records[0].id, records[2].id, records[4].id]
    assert [r.id for r in await stores.operations.claimable(2)] == [records[0].id, records[2].id]
    assert await stores.operations.claimable(0) == []


async def test_claim_moves_to_running(stores: Stores, make_operation: MakeOperation) -> None:
    record = make_operation(version=4)
    await stores.operations.add(record)

    claimed = await stores.operations.claim(record.id, 4, "worker-a", LATER)

    assert claimed is not None
    assert claimed.status is OperationStatus.RUNNING
    assert (claimed.version, claimed.worker_id) == (5, "worker-a")
    assert claimed.heartbeat_at == LATER and claimed.started_at == LATER
    assert await stores.operations.get(record.id) == claimed


async def test_claim_keeps_first_started_at(stores: Stores, make_operation: MakeOperation) -> None:
    record = make_operation(status=OperationStatus.RETRYING, started_at=BASE_TIME)
    await stores.operations.add(record)

    claimed = await stores.operations.claim(record.id, 0, "worker-b", LATER)

    assert claimed is not None and claimed.started_at == BASE_TIME
    assert claimed.heartbeat_at == LATER


async def test_claim_refuses_stale_version_unknown_id_and_unclaimable_status(
    stores: Stores, make_operation: MakeOperation
) -> None:
    pending = make_operation(version=2)
    running = make_operation(status=OperationStatus.RUNNING)
    for record in (pending, running):
        await stores.operations.add(record)

    assert await stores.operations.claim(pending.id, 1, "w", LATER) is None
    assert await stores.operations.claim(running.id, 0, "w", LATER) is None
    assert await stores.operations.claim(uuid.uuid4(), 0, "w", LATER) is None
    assert await stores.operations.get(pending.id) == pending
    assert await stores.operations.get(running.id) == running


async def test_concurrent_claims_of_one_version_have_one_winner(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation()
    await stores.operations.add(record)

    results = await asyncio.gather(
        *(stores.operations.claim(record.id, 0, f"worker-{i}", LATER) for i in range(6))
    )

    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    stored = await stores.operations.get(record.id)
    assert stored is not None and stored.version == 1
    assert stored.worker_id == winners[0].worker_id


async def test_transition_follows_the_table(stores: Stores, make_operation: MakeOperation) -> None:
    for source, target in itertools.product(OperationStatus, OperationStatus):
        record = make_operation(status=source, version=3)
        await stores.operations.add(record)

        updated = await stores.operations.transition(record.id, target, LATER)

        if can_transition(source, target):
            assert updated is not None, (source, target)
            assert updated.status is target and updated.version == 4
        else:
            assert updated is None, (source, target)
            assert await stores.operations.get(record.id) == record


async def test_transition_to_terminal_sets_completed_at_and_message(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(status=OperationStatus.RUNNING, worker_id="w", heartbeat_at=BASE_TIME)
    await stores.operations.add(record)

    failed = await stores.operations.transition(
        record.id, OperationStatus.FAILED, LATER, error_message="file unreadable"
    )

    assert failed is not None
    assert failed.completed_at == LATER and failed.error_message == "file unreadable"
    assert failed.worker_id == "w"  # only a move to Pending releases the worker
    assert await stores.operations.get(record.id) == failed
    # A cancelled operation cannot be completed by a worker that finishes late.
    cancelled = make_operation(status=OperationStatus.CANCELLED)
    await stores.operations.add(cancelled)
    assert (
        await stores.operations.transition(cancelled.id, OperationStatus.COMPLETED, LATER) is None
    )


async def test_transition_without_message_keeps_the_old_one(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(status=OperationStatus.RUNNING, error_message="earlier")
    await stores.operations.add(record)

    done = await stores.operations.transition(record.id, OperationStatus.COMPLETED, LATER)

    assert done is not None and done.error_message == "earlier"


async def test_transition_to_pending_releases_the_worker(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(
        status=OperationStatus.RUNNING, worker_id="w", heartbeat_at=BASE_TIME, started_at=BASE_TIME
    )
    await stores.operations.add(record)

    handed_back = await stores.operations.transition(record.id, OperationStatus.PENDING, LATER)

    assert handed_back is not None
    assert handed_back.worker_id is None and handed_back.heartbeat_at is None
    assert handed_back.completed_at is None and handed_back.started_at == BASE_TIME


async def test_transition_with_expected_version(
    stores: Stores, make_operation: MakeOperation
) -> None:
    record = make_operation(status=OperationStatus.RUNNING, version=7)
    await stores.operations.add(record)

    stale = await stores.operations.transition(
        record.id, OperationStatus.CANCELLED, LATER, expected_version=6
    )
    assert stale is None
    assert await stores.operations.get(record.id) == record

    results = await asyncio.gather(
        *(
            stores.operations.transition(
                record.id, OperationStatus.PENDING, LATER, expected_version=7
            )
            for _ in range(5)
        )
    )
    assert sum(r is not None for r in results) == 1


async def test_transition_of_unknown_operation_is_none(stores: Stores) -> None:
    assert await stores.operations.transition(uuid.uuid4(), OperationStatus.FAILED, LATER) is None


async def test_set_total_rows(stores: Stores, make_operation: MakeOperation) -> None:
    record = make_operation()
    await stores.operations.add(record)

    await stores.operations.set_total_rows(record.id, 42)
    await stores.operations.set_total_rows(uuid.uuid4(), 1)  # unknown: ignored

    got = await stores.operations.get(record.id)
    assert got is not None and got.total_rows == 42 and got.version == record.version


async def test_heartbeat_renews_only_this_workers_running_operations(
    stores: Stores, make_operation: MakeOperation
) -> None:
    running = make_operation(status=OperationStatus.RUNNING, worker_id="w1", heartbeat_at=BASE_TIME)
    other = make_operation(status=OperationStatus.RUNNING, worker_id="w2", heartbeat_at=BASE_TIME)
    # Cancelled while held: a late heartbeat must not touch it.
    cancelled = make_operation(
        status=OperationStatus.CANCELLED, worker_id="w1", heartbeat_at=BASE_TIME
    )
    for record in (running, other, cancelled):
        await stores.operations.add(record)

    ids = [running.id, other.id, cancelled.id, uuid.uuid4()]
    await stores.operations.heartbeat(ids, "w1", LATER)
    await stores.operations.heartbeat([], "w1", LATER)

    assert await stores.operations.get(running.id) == replace(running, heartbeat_at=LATER)
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


async def test_recount_recomputes_counters_from_row_states(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    record = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(record)
    states = [RowState.COMPLETED] * 3 + [RowState.FAILED] * 2
    states += [RowState.PENDING, RowState.RUNNING, RowState.WAITING_FOR_COMPLETION]
    rows = [make_row(record.id, n, state=s) for n, s in enumerate(states, start=1)]
    # A wrong delta, as after a crash between flushes.
    await stores.rows.save(record.id, rows, ProgressDelta(processed=99, successful=1, failed=50))

    recounted = await stores.operations.recount(record.id)

    assert recounted is not None
    assert (recounted.processed_rows, recounted.successful_rows, recounted.error_count) == (5, 3, 2)
    assert await stores.operations.get(record.id) == recounted
    assert await stores.operations.recount(uuid.uuid4()) is None


async def test_recount_without_rows_is_zero(stores: Stores, make_operation: MakeOperation) -> None:
    record = make_operation(processed_rows=4, successful_rows=4)
    await stores.operations.add(record)

    recounted = await stores.operations.recount(record.id)

    assert recounted is not None
    assert (recounted.processed_rows, recounted.successful_rows, recounted.error_count) == (0, 0, 0)


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
    assert database.dialect_name == "postgresql"
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
