"""0018: plain completions stored as spans; the downgrade writes them back as the row
records they stand for, so nothing is lost either way (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from alembic import command
from sqlalchemy import create_engine, inspect

from bulkops.storage.records import ProgressDelta, RowRecord
from bulkops.storage.sql import SqlStore, migrate
from bulkops.storage.sql.database import parse_url
from bulkops.storage.sql.migrate import alembic_config
from bulkops.storage.states import ErrorType, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, with_sql_store
from tests.contract.test_operation_store import fresh_sql_url as fresh_sql_url  # the fixture


def test_0018_spans_go_back_to_row_records_with_a_downgrade(
    fresh_sql_url: str, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = make_operation()
    rows: list[RowRecord] = [
        make_row(op.id, n, row_id=None, completed_at=BASE_TIME + timedelta(seconds=n // 100))
        for n in range(1, 301)
    ]
    rows[149] = make_row(op.id, 150, state=RowState.FAILED, error_type=ErrorType.PROCESSING)
    engine = create_engine(parse_url(fresh_sql_url, asynchronous=False))

    async def read_all(store: SqlStore) -> list[RowRecord]:
        return [row async for row in store.iterate(op.id)]

    async def store_rows(store: SqlStore) -> None:
        await store.add(op)
        await store.save(op.id, rows, ProgressDelta(300, 299, 1))

    try:
        migrate(fresh_sql_url)
        with_sql_store(fresh_sql_url, store_rows)
        with engine.connect() as conn:
            spans = conn.exec_driver_sql("SELECT count(*) FROM row_spans").scalar_one()
        assert spans == 5  # 1-99, 100-149, 151-199, 200-299, 300: by second, not 150
        assert with_sql_store(fresh_sql_url, read_all) == rows
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0017")
        assert "row_spans" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            stored = conn.exec_driver_sql("SELECT count(*) FROM row_records").scalar_one()
        assert stored == 300
        migrate(fresh_sql_url)
        assert with_sql_store(fresh_sql_url, read_all) == rows  # now from row records alone
    finally:
        engine.dispose()
