"""0017: operations stored before it keep a null fileSha256; saved mappings go with a
downgrade and come back empty with the upgrade (SQLite and PostgreSQL)."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, inspect

from bulkops.storage.records import SavedMapping
from bulkops.storage.sql import SqlStore, migrate
from bulkops.storage.sql.database import parse_url
from bulkops.storage.sql.migrate import alembic_config
from tests.contract.conftest import BASE_TIME, MakeOperation, with_sql_store
from tests.contract.test_operation_store import fresh_sql_url as fresh_sql_url  # the fixture


def test_0017_adds_hashes_and_mappings_and_takes_them_back(
    fresh_sql_url: str, make_operation: MakeOperation
) -> None:
    before = make_operation()
    engine = create_engine(parse_url(fresh_sql_url, asynchronous=False))

    try:
        migrate(fresh_sql_url)
        with_sql_store(fresh_sql_url, lambda store: store.add(before))

        async def check(store: SqlStore) -> None:
            stored = await store.get(before.id)
            assert stored is not None and stored.file_sha256 is None
            mapping = SavedMapping(None, "import-users", "m", {"A": "a"}, BASE_TIME)
            await store.save_mapping(mapping)
            assert await store.list_mappings(None, "import-users") == [mapping]

        with_sql_store(fresh_sql_url, check)
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0016")
        names = inspect(engine).get_table_names()
        columns = {c["name"] for c in inspect(engine).get_columns("operations")}
        assert "saved_mappings" not in names and "file_sha256" not in columns
        migrate(fresh_sql_url)
        mappings = with_sql_store(fresh_sql_url, lambda s: s.list_mappings(None, "import-users"))
        assert mappings == []
    finally:
        engine.dispose()
