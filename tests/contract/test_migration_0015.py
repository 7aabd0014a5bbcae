"""Migration 0015 (actors, first data, bulk actions) goes down and up with nothing of
what came before lost: events stored before it are the service's (``"system"``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from alembic import command
from sqlalchemy import create_engine

from bulkops.storage import lifecycle
from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
from bulkops.storage.sql.database import parse_url
from bulkops.storage.sql.migrate import alembic_config
from tests.contract.conftest import BASE_TIME, MakeOperation
from tests.contract.test_operation_store import fresh_sql_url

__all__ = ["fresh_sql_url"]  # the fixture, used here


def test_0015_goes_down_and_up_keeping_every_event(
    fresh_sql_url: str, make_operation: MakeOperation
) -> None:
    url = fresh_sql_url
    migrate(url)
    op = make_operation(created_by="carol")

    async def with_store(action: Callable[[SqlStore, SqlEventStore], Any]) -> Any:
        database = Database.from_url(url)
        try:
            return await action(SqlStore(database), SqlEventStore(database))
        finally:
            await database.close()

    async def add(store: SqlStore, _: SqlEventStore) -> None:
        await store.add(op, [lifecycle.created_event(op, BASE_TIME)])

    async def actors(_: SqlStore, events: SqlEventStore) -> list[str]:
        return [e.actor for e in await events.read(after=None, limit=10)]

    asyncio.run(with_store(add))
    assert asyncio.run(with_store(actors)) == ["carol"]
    engine = create_engine(parse_url(url, asynchronous=False))
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0014")
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "head")
    finally:
        engine.dispose()
    assert asyncio.run(with_store(actors)) == ["system"]
