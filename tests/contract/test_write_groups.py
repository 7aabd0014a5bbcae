"""Group commit of SQLite writes: writes that arrive together share one transaction, and
one that fails is rolled back alone."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bulkops.errors import StorageError
from bulkops.storage.sql import Database


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database.from_url(f"sqlite:///{tmp_path / 'groups.db'}")
    await db.write_sqlite(lambda c: c.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
    try:
        yield db
    finally:
        await db.close()


def insert(n: int) -> Callable[[sqlite3.Connection], int]:
    def work(connection: sqlite3.Connection) -> int:
        connection.execute("INSERT INTO t VALUES (?)", (n,))
        return n

    return work


def insert_then_fail(n: int) -> Callable[[sqlite3.Connection], int]:
    def work(connection: sqlite3.Connection) -> int:
        connection.execute("INSERT INTO t VALUES (?)", (n,))
        raise ValueError(f"write {n} refused")

    return work


async def stored(database: Database) -> list[int]:
    rows = await database.read_sqlite(lambda c: c.execute("SELECT n FROM t ORDER BY n").fetchall())
    return [n for (n,) in rows]


def count_transactions(database: Database) -> list[int]:
    """How many works each writer transaction held, as they run."""
    writer: Any = database._writer
    seen: list[int] = []
    single, group = writer.run, writer.run_group

    async def one(work: Any) -> Any:
        seen.append(1)
        return await single(work)

    async def many(works: list[Any]) -> Any:
        seen.append(len(works))
        return await group(works)

    writer.run, writer.run_group = one, many
    return seen


async def test_writes_that_arrive_together_share_a_transaction(database: Database) -> None:
    seen = count_transactions(database)

    results = await asyncio.gather(*(database.write_sqlite(insert(n)) for n in range(1, 21)))

    assert results == list(range(1, 21))
    assert await stored(database) == list(range(1, 21))
    assert seen == [20]  # queued in one turn of the loop: stored in one transaction
    # One at a time, each waits for none: a transaction each, as before.
    for n in range(21, 24):
        await database.write_sqlite(insert(n))
    assert seen == [20, 1, 1, 1]


async def test_a_failing_write_is_rolled_back_alone(database: Database) -> None:
    writes = [insert(1), insert_then_fail(2), insert(3)]

    outcomes = await asyncio.gather(
        *(database.write_sqlite(work) for work in writes), return_exceptions=True
    )

    assert outcomes[0] == 1 and outcomes[2] == 3
    assert isinstance(outcomes[1], ValueError) and "write 2 refused" in str(outcomes[1])
    assert await stored(database) == [1, 3]


async def test_a_write_alone_that_fails_is_rolled_back(database: Database) -> None:
    with pytest.raises(ValueError, match="refused"):
        await database.write_sqlite(insert_then_fail(7))
    await database.write_sqlite(insert(8))
    assert await stored(database) == [8]


async def test_a_cancelled_writer_does_not_take_the_others_down(database: Database) -> None:
    first = asyncio.ensure_future(database.write_sqlite(insert(1)))
    waiting = [asyncio.ensure_future(database.write_sqlite(insert(n))) for n in (2, 3)]
    await asyncio.sleep(0)  # all three queued
    waiting[0].cancel()

    assert await first == 1 and await waiting[1] == 3
    assert await stored(database) == [1, 2, 3]  # a write once queued is stored regardless


async def test_a_write_whose_commit_fails_is_rolled_back_and_the_writer_goes_on(
    database: Database,
) -> None:
    """A deferred foreign key fails at COMMIT and leaves the transaction open: the writer
    rolls it back, so the next write begins a transaction of its own."""
    await database.write_sqlite(
        lambda c: c.execute(
            "CREATE TABLE child (n INTEGER REFERENCES t (n) DEFERRABLE INITIALLY DEFERRED)"
        )
    )

    def orphan(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO t VALUES (1)")
        connection.execute("INSERT INTO child VALUES (99)")

    with pytest.raises(StorageError, match="FOREIGN KEY"):
        await database.write_sqlite(orphan)
    await database.write_sqlite(insert(2))

    assert await stored(database) == [2]
