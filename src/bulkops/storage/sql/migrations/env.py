"""Alembic environment: runs on the connection (and transaction) ``migrate()`` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from bulkops.storage.sql.schema import metadata


def _run_online() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run bulkops migrations through bulkops.storage.sql.migrate()")
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things; autogenerate then emits copy-and-move batches.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    # migrate() already began the transaction (and holds the migration lock), so Alembic
    # joins it instead of committing on its own.
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("bulkops migrations run online only (use bulkops.storage.sql.migrate)")
_run_online()
