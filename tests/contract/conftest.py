"""Fixtures of the storage contract suite: every test runs on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bulkops.storage.memory import MemoryEventStore, MemoryStore
from bulkops.storage.ports import EventStore, OperationStore, RetryStore, RowStore
from bulkops.storage.records import OperationRecord, RowRecord
from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
from bulkops.storage.states import OperationStatus, RowState
from tests.conftest import TRUNCATE_ALL


def with_sql_store(url: str, work: Callable[[SqlStore], Any]) -> Any:
    """Run ``work`` (a coroutine function of the store) on a store of the database at
    ``url``, opened for it and closed after (the migration tests, between migrations)."""

    async def run() -> Any:
        database = Database.from_url(url)
        try:
            return await work(SqlStore(database))
        finally:
            await database.close()

    return asyncio.run(run())


# A fixed, microsecond-precise base time: every backend must round-trip it exactly.
BASE_TIME = datetime(2024, 5, 17, 9, 30, 15, 123456, tzinfo=UTC)


@dataclass(frozen=True)
class Stores:
    """The stores under test. ``operations`` and ``rows`` are one object, as in production."""

    kind: str
    operations: OperationStore
    rows: RowStore
    events: EventStore
    retries: RetryStore
    database: Database | None = None


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test (migrating takes longer than copying)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "bulkops.db"
    migrate(f"sqlite:///{path}")
    return path


async def _truncate(database: Database) -> None:
    async with database.write() as conn:
        await conn.exec_driver_sql(TRUNCATE_ALL)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    """Fresh, empty stores of one backend."""
    kind: str = request.param
    if kind == "memory":
        events = MemoryEventStore()
        memory = MemoryStore(events)
        yield Stores(kind, memory, memory, events, memory)
        return
    if kind == "sqlite":
        path = tmp_path / "bulkops.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        database = Database.from_url(f"sqlite:///{path}")
    else:
        database = Database.from_url(request.getfixturevalue("migrated_postgres_url"))
        await _truncate(database)
    store = SqlStore(database)
    try:
        yield Stores(kind, store, store, SqlEventStore(database), store, database)
    finally:
        await database.close()


MakeOperation = Callable[..., OperationRecord]
MakeRow = Callable[..., RowRecord]


@pytest.fixture
def make_operation() -> MakeOperation:
    """``make_operation(**overrides)``: a Pending operation with every field filled in.

    Each call is one second newer than the previous one unless ``created_at`` is given.
    """
    counter = iter(range(1_000_000))

    def make(**overrides: Any) -> OperationRecord:
        record = OperationRecord(
            id=uuid.uuid4(),
            operation_name="import-users",
            status=OperationStatus.PENDING,
            created_by="alice@example.com",
            created_at=BASE_TIME + timedelta(seconds=next(counter)),
            source="api",
            file_id=uuid.uuid4().hex,
            file_name="users.csv",
            file_size=1234,
            file_format="csv",
            metadata={"dryRun": False, "tags": ["a", "b"], "nested": {"x": 1.5}},
        )
        return replace(record, **overrides)

    return make


@pytest.fixture
def make_row() -> MakeRow:
    """``make_row(operation_id, row_number, **overrides)``: a Completed row-based record."""

    def make(operation_id: uuid.UUID, row_number: int, **overrides: Any) -> RowRecord:
        row = RowRecord(
            operation_id=operation_id,
            row_number=row_number,
            state=RowState.COMPLETED,
            row_id=f"id-{row_number}",
            step_name="process",
            completed_at=BASE_TIME + timedelta(milliseconds=row_number),
        )
        return replace(row, **overrides)

    return make
