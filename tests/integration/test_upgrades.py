"""Upgrades: a database at every earlier schema revision, holding operations in every
status with rows, events, retry history, chunks, deliveries and fixes (where the revision
has them), migrated to the newest revision and read back through the current stores with
nothing lost; and processes that refuse a schema revision their code does not match.

The revisions come from the packaged migrations, so a migration added later is covered
without touching this file. Each database is built by migrating a fresh one to the
revision and inserting rows into the tables as they were then (reflected), with the
values that revision's columns take.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, MetaData, NullPool, create_engine, text
from typer.testing import CliRunner

from bulkops.cli.main import app
from bulkops.settings import Settings
from bulkops.storage.records import RowQuery
from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
from bulkops.storage.sql.database import configure_sqlite, engine_arguments, parse_url
from bulkops.storage.sql.migrate import (
    SchemaMismatch,
    alembic_config,
    check_schema,
    head_revision,
    schema_revision,
)
from bulkops.wire import ErrorType, OperationStatus, RowState
from tests.conftest import POSTGRES_ENV

HEAD = head_revision()
EARLIER = [
    revision.revision
    for revision in reversed(list(ScriptDirectory.from_config(alembic_config()).walk_revisions()))
    if revision.revision != HEAD
]
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SHEET_KEY = "sheet"  # where revisions before ``sheet`` kept an operation's worksheet

# --- the data -----------------------------------------------------------------------------

STATUSES = list(OperationStatus)
OPERATION_IDS = {status: uuid.uuid5(uuid.NAMESPACE_URL, f"op/{status}") for status in STATUSES}
ROW_STATES = [
    (RowState.PENDING, None),
    (RowState.RUNNING, None),
    (RowState.WAITING_FOR_COMPLETION, None),
    (RowState.COMPLETED, None),
    (RowState.FAILED, ErrorType.VALIDATION),
    (RowState.FAILED, ErrorType.STEP_FAILURE),
]


def operation_values(status: OperationStatus, number: int) -> dict[str, Any]:
    """Every column of ``operations`` (at the newest revision this test knows) for one
    operation in ``status``."""
    started = status != OperationStatus.PENDING
    final = status.is_terminal
    rows = len(ROW_STATES)
    return {
        "id": OPERATION_IDS[status],
        "operation_name": "users.import",
        "status": status.value,
        "created_by": f"user-{number}",
        "created_at": T0 + timedelta(minutes=number),
        "source": "api",
        "file_id": f"file-{number}",
        "file_name": f"users-{number}.csv",
        "file_size": 1000 + number,
        "file_format": "csv",
        "metadata": {"batch": number, "note": "ünïcode"},
        "notifications": {"webhook": "https://example.com/hook"},
        "started_at": T0 + timedelta(minutes=number, seconds=1) if started else None,
        "completed_at": T0 + timedelta(minutes=number, seconds=9) if final else None,
        "total_rows": rows,
        "processed_rows": 3,
        "successful_rows": 1,
        "error_count": 2,
        "retry_count": 1 if status == OperationStatus.RETRYING else 0,
        "error_message": "the file is unreadable" if status == OperationStatus.FAILED else None,
        "version": number,
        "worker_id": "host:1:abc" if status == OperationStatus.RUNNING else None,
        "heartbeat_at": T0 if status == OperationStatus.RUNNING else None,
        "resume_count": 2,
        "column_map": {"Email": "email"},
        "schema_version": "v2",
        "tenant": "acme",
        "priority": 3,
        "dry_run": status == OperationStatus.COMPLETED,
        "source_operation_id": OPERATION_IDS[OperationStatus.COMPLETED_WITH_ERRORS]
        if status == OperationStatus.PENDING
        else None,
        "sheet": "Users",
    }


# What an operation's column is after the upgrade when its revision did not have it.
OPERATION_DEFAULTS: dict[str, Any] = {
    "resume_count": 0,
    "column_map": None,
    "schema_version": None,
    "tenant": None,
    "priority": 0,
    "dry_run": False,
    "source_operation_id": None,
    "sheet": None,
}


def row_values(operation_id: UUID, number: int) -> dict[str, Any]:
    """Every column of ``row_records`` for row ``number`` (1-based) of an operation."""
    state, error = ROW_STATES[number - 1]
    waiting = state == RowState.WAITING_FOR_COMPLETION
    steps = [
        {
            "name": "create",
            "index": 0,
            "state": state.value,
            "attempts": 1,
            "startedAt": T0.isoformat(),
            "completedAt": None,
            "errorType": error.value if error else None,
            "errorMessage": "boom" if error else None,
            "signalKey": f"sig-{number}" if waiting else None,
        }
    ]
    return {
        "operation_id": operation_id,
        "row_number": number,
        "state": state.value,
        "row_id": f"row-{number}",
        "step_index": 0,
        "step_name": "create",
        "error_type": error.value if error else None,
        "error_message": "boom" if error else None,
        "retry_attempt": 1 if error else 0,
        "signal_key": f"sig-{number}" if waiting else None,
        "row_data": {"email": f"u{number}@example.com", "n": number},
        "steps": steps,
        "waiting_since": T0 if waiting else None,
        "completed_at": T0 + timedelta(seconds=number) if state.is_final else None,
    }


def fixture_tables() -> dict[str, list[dict[str, Any]]]:
    """Rows of every table, by table name; a revision inserts those of the tables and
    columns it has."""
    operations, rows, events, history, fixes = [], [], [], [], []
    for number, status in enumerate(STATUSES, start=1):
        op_id = OPERATION_IDS[status]
        operations.append(operation_values(status, number))
        rows.extend(row_values(op_id, n) for n in range(1, len(ROW_STATES) + 1))
        events.append(
            {
                "operation_id": op_id,
                "operation_name": "users.import",
                "type": "Created",
                "severity": "Info",
                "message": f"created {number}",
                "timestamp": T0 + timedelta(minutes=number),
                "tenant": "acme",
            }
        )
        history.append(
            {
                "operation_id": op_id,
                "row_number": 5,
                "attempt": 1,
                "step_index": 0,
                "step_name": "create",
                "error_type": "Validation",
                "error_message": "earlier boom",
                "failed_at": T0,
            }
        )
        fixes.append(
            {
                "operation_id": op_id,
                "row_number": 5,
                "row_data": {"email": "fixed@example.com", "n": 5},
                "fixed_at": T0 + timedelta(hours=1),
            }
        )
    running = OPERATION_IDS[OperationStatus.RUNNING]
    return {
        "operations": operations,
        "row_records": rows,
        "events": events,
        "retry_history": history,
        "chunks": [
            {
                "operation_id": running,
                "chunk_index": index,
                "first_row": 1 + 3 * index,
                "row_count": 3,
                "byte_offset": 40 * index,
                "state": state,
                "worker_id": "host:1:abc" if state == "Running" else None,
                "heartbeat_at": T0 if state == "Running" else None,
                "version": 1,
                "resume_count": index,
            }
            for index, state in enumerate(("Done", "Running"))
        ],
        "notification_deliveries": [
            {
                "id": uuid.uuid5(uuid.NAMESPACE_URL, "delivery"),
                "operation_id": OPERATION_IDS[OperationStatus.COMPLETED],
                "channel": "webhook",
                "target": "https://example.com/hook",
                "trigger": "completed",
                "event": "OperationCompleted",
                "payload": {"id": "x"},
                "created_at": T0,
                "state": "Pending",
                "attempts": 1,
                "next_attempt_at": T0,
                "last_status_code": 500,
                "last_error": "server error",
                "delivered_at": None,
                "claimed_by": None,
                "claimed_until": None,
            }
        ],
        "idempotency_keys": [
            {
                "principal": "user-1",
                "key": "k-1",
                "fingerprint": "f" * 64,
                "operation_id": OPERATION_IDS[OperationStatus.PENDING],
                "created_at": T0,
            }
        ],
        "completed_steps": [
            {"operation_id": OPERATION_IDS[status], "step_name": "create"} for status in STATUSES
        ],
        "row_fixes": fixes,
    }


# --- building a database at a revision ----------------------------------------------------


def sync_engine(url: str) -> Engine:
    target = parse_url(url, asynchronous=False)
    engine = create_engine(target, poolclass=NullPool, **engine_arguments(target))
    if target.get_backend_name() == "sqlite":
        configure_sqlite(engine)
    return engine


def build_at(url: str, revision: str) -> None:
    """Migrate the empty database at ``url`` to ``revision`` and fill it with the data."""
    engine = sync_engine(url)
    try:
        with engine.connect() as connection, connection.begin():
            command.upgrade(alembic_config(connection), revision)
        with engine.connect() as connection, connection.begin():
            metadata = MetaData()
            metadata.reflect(connection)
            sqlite = connection.dialect.name == "sqlite"
            for name, records in fixture_tables().items():
                table = metadata.tables.get(name)
                if table is None:
                    continue
                columns = set(table.columns.keys())
                for record in records:
                    values = dict(record)
                    if name == "operations" and "sheet" not in columns:
                        values["notifications"] = {
                            **values["notifications"],
                            SHEET_KEY: values["sheet"],
                        }
                    picked = {k: encode(v, sqlite) for k, v in values.items() if k in columns}
                    connection.execute(table.insert().values(**picked))
    finally:
        engine.dispose()


def encode(value: Any, sqlite: bool) -> Any:
    """A value as the reflected column takes it on this database."""
    if sqlite and isinstance(value, UUID):
        return str(value)
    if sqlite and isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def columns_at(url: str) -> dict[str, set[str]]:
    engine = sync_engine(url)
    try:
        metadata = MetaData()
        with engine.connect() as connection:
            metadata.reflect(connection)
        return {name: set(table.columns.keys()) for name, table in metadata.tables.items()}
    finally:
        engine.dispose()


# --- databases -----------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'upgrade.db'}"
        return
    import os

    admin = os.environ.get(POSTGRES_ENV)
    if not admin:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    name = f"bulkops_upgrade_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- the upgrade ---------------------------------------------------------------------------


@pytest.mark.parametrize("revision", EARLIER)
def test_an_upgrade_from_every_earlier_revision_keeps_everything(
    fresh_url: str, revision: str
) -> None:
    build_at(fresh_url, revision)
    before = columns_at(fresh_url)
    assert schema_revision(fresh_url) == revision

    result = CliRunner().invoke(app, ["migrate", "--database-url", fresh_url])
    assert result.exit_code == 0, result.output
    assert schema_revision(fresh_url) == HEAD
    assert check_schema(fresh_url) == HEAD

    asyncio.run(read_back(fresh_url, before))


async def read_back(url: str, before: dict[str, set[str]]) -> None:
    """Everything inserted at the earlier revision, read through the current stores."""
    database = Database.from_url(url)
    store, events = SqlStore(database), SqlEventStore(database)
    data = fixture_tables()
    had = before["operations"]
    try:
        for expected in data["operations"]:
            record = await store.get(expected["id"])
            assert record is not None, expected["status"]
            for column, value in expected.items():
                field = column
                if column not in had:
                    value = OPERATION_DEFAULTS[column]
                    if column == "sheet":
                        value = expected["sheet"]  # moved out of the notifications
                got = getattr(record, field)
                got = got.value if hasattr(got, "value") else got
                assert got == value, (expected["status"], column)

            page = await store.page(RowQuery(operation_id=expected["id"], page_size=100))
            assert page.total_count == len(ROW_STATES)
            for row, wanted in zip(page.items, data["row_records"][: len(ROW_STATES)], strict=True):
                assert row.row_number == wanted["row_number"]
                assert row.state.value == wanted["state"]
                assert row.row_id == wanted["row_id"]
                assert (row.error_type.value if row.error_type else None) == wanted["error_type"]
                assert row.error_message == wanted["error_message"]
                assert row.retry_attempt == wanted["retry_attempt"]
                assert row.signal_key == wanted["signal_key"]
                assert row.row_data == wanted["row_data"]
                assert [step.to_json() for step in row.steps] == wanted["steps"]
                assert row.completed_at == wanted["completed_at"]
                assert row.waiting_since == wanted["waiting_since"]
            counts = await store.counts(expected["id"])
            assert counts is not None

        feed = await events.read(after=0, limit=1000)
        assert [event.message for event in feed] == [e["message"] for e in data["events"]]
        tenants = {event.tenant for event in feed}
        assert tenants == ({"acme"} if "tenant" in before["events"] else {None})

        for status in STATUSES:
            op_id = OPERATION_IDS[status]
            history = await store.history(op_id, row_number=None, page=1, page_size=10)
            if "retry_history" in before:
                assert [h.error_message for h in history.items] == ["earlier boom"]
            fixes = await store.fixes(op_id)
            if "row_fixes" in before:
                assert fixes == {5: {"email": "fixed@example.com", "n": 5}}
            else:
                assert fixes == {}
        if "chunks" in before:
            running = OPERATION_IDS[OperationStatus.RUNNING]
            chunk = await store.get_chunk(running, 1)
            assert chunk is not None
            assert (chunk.state.value, chunk.worker_id, chunk.first_row) == (
                "Running",
                "host:1:abc",
                4,
            )
        if "notification_deliveries" in before:
            delivered = await store.deliveries(OPERATION_IDS[OperationStatus.COMPLETED])
            assert [(d.attempts, d.last_status_code) for d in delivered] == [(1, 500)]
    finally:
        await database.close()
    # Upgrades that derive data (the Completed rows' step names) derived it.
    engine = sync_engine(url)
    try:
        with engine.connect() as connection:
            steps = connection.execute(text("SELECT count(*) FROM completed_steps")).scalar()
        assert steps == len(STATUSES)
    finally:
        engine.dispose()


# --- refusing a schema the code does not match --------------------------------------------


def test_a_process_that_does_not_migrate_refuses_an_older_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    build_at(url, EARLIER[-1])

    with pytest.raises(SchemaMismatch) as caught:
        check_schema(url)
    assert EARLIER[-1] in str(caught.value) and HEAD in str(caught.value)
    assert "bulkops migrate" in str(caught.value)

    for command_name in ("serve", "worker"):
        result = CliRunner().invoke(
            app, [command_name, "--database-url", url], env={"BULKOPS_MIGRATE_ON_START": "false"}
        )
        assert result.exit_code == 1, result.output
        assert EARLIER[-1] in result.output and HEAD in result.output
    assert schema_revision(url) == EARLIER[-1]  # refused, not migrated


def stamp_newer(url: str) -> str:
    """Pretend a newer bulkops migrated the database (a revision this code lacks)."""
    newer = f"{HEAD}_newer"
    engine = sync_engine(url)
    try:
        with engine.connect() as connection, connection.begin():
            connection.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": newer})
    finally:
        engine.dispose()
    return newer


def test_every_process_refuses_a_schema_newer_than_its_code(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    migrate(url)
    newer = stamp_newer(url)

    with pytest.raises(SchemaMismatch, match="newer than this bulkops") as caught:
        check_schema(url)
    assert newer in str(caught.value) and HEAD in str(caught.value)
    with pytest.raises(SchemaMismatch, match="newer than this bulkops"):
        migrate(url)  # migrating refuses too, and leaves the database alone

    for arguments, migrates in (
        (["migrate"], "true"),
        (["serve"], "true"),
        (["serve"], "false"),
        (["serve", "--role", "api"], "false"),
        (["worker"], "true"),
        (["worker"], "false"),
    ):
        result = CliRunner().invoke(
            app,
            [*arguments, "--database-url", url],
            env={"BULKOPS_MIGRATE_ON_START": migrates},
        )
        assert result.exit_code == 1, (arguments, migrates, result.output)
        assert newer in result.output and HEAD in result.output, (arguments, migrates)
    assert schema_revision(url) == newer


async def test_the_runtime_refuses_a_mismatched_schema_when_embedded(tmp_path: Path) -> None:
    from bulkops.definition.registry import load_registry
    from bulkops.runtime import EXAMPLES_MODULE, Runtime

    url = f"sqlite:///{tmp_path / 'embedded.db'}"
    migrate(url)
    newer = stamp_newer(url)
    registry = load_registry([EXAMPLES_MODULE])
    for migrate_on_start in (True, False):
        settings = Settings(database_url=url, migrate_on_start=migrate_on_start)
        with pytest.raises(SchemaMismatch, match=newer):
            await Runtime.open(settings, registry, role="api")
