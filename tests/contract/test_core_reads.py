"""Reads of several statements in one transaction (``Database.read_core``): one hop to a
reader thread of their own on SQLite, the async connection on PostgreSQL."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Connection, func, select, text

from bulkops.errors import StorageError
from bulkops.storage.records import ProgressDelta, RowQuery
from bulkops.storage.sql.schema import row_records
from bulkops.storage.states import OperationStatus
from tests.contract.conftest import MakeOperation, MakeRow, Stores


async def test_a_core_read_runs_its_statements_in_one_transaction(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    if stores.database is None:
        pytest.skip("a SQL matter")
    op = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(op)
    await stores.rows.save(op.id, [make_row(op.id, n) for n in (1, 2, 3)], ProgressDelta(3, 3, 0))
    count = select(func.count()).where(row_records.c.operation_id == op.id)

    def read(conn: Connection) -> tuple[int, int]:
        return conn.execute(count).scalar_one(), conn.execute(
            select(func.max(row_records.c.row_number))
        ).scalar_one()

    assert await stores.database.read_core(read) == (3, 3)
    page = await stores.rows.page(RowQuery(op.id, page_size=2))
    assert [row.row_number for row in page.items] == [1, 2] and page.total_count == 3


async def test_a_core_read_leaves_no_read_transaction_open(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, tmp_path: Path
) -> None:
    """A read transaction left open would pin the SQLite write-ahead log: a checkpoint
    could never truncate it, and it would grow for ever."""
    if stores.kind != "sqlite":
        pytest.skip("the write-ahead log is a SQLite matter")
    assert stores.database is not None
    op = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(op)
    await stores.rows.save(op.id, [make_row(op.id, 1)], ProgressDelta(1, 1, 0))
    await stores.rows.page(RowQuery(op.id))

    with contextlib.closing(sqlite3.connect(tmp_path / "bulkops.db")) as other:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0


async def test_a_failed_core_read_is_a_storage_error(stores: Stores) -> None:
    if stores.database is None:
        pytest.skip("a SQL matter")

    def broken(conn: Connection) -> object:
        return conn.execute(text("SELECT * FROM no_such_table")).all()

    with pytest.raises(StorageError):
        await stores.database.read_core(broken)
    assert (
        await stores.database.read_core(lambda conn: conn.execute(text("SELECT 1")).scalar_one())
        == 1
    )
