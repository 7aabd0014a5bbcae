"""Schema migrations: Alembic, configured in code, run under a cross-process lock."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import NullPool, create_engine, text
from sqlalchemy.engine import URL, Connection

from bulkops.errors import StorageError
from bulkops.storage.sql.database import (
    DRIVER_ERRORS,
    WRITE_OPTION,
    configure_sqlite,
    describe_error,
    engine_arguments,
    parse_url,
)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

# Key of the PostgreSQL advisory lock that serialises concurrent migrate() calls
# (an arbitrary constant: the bytes of "bulkops" read as an integer).
ADVISORY_LOCK_KEY = int.from_bytes(b"bulkops", "big")


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for the packaged migrations (no alembic.ini needed).

    Args:
        connection: the connection ``env.py`` runs on; required for commands that touch a
            database.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def migrate(url: str) -> None:
    """Bring the database at ``url`` to the newest schema revision.

    Safe when several processes start at once: on SQLite the whole upgrade runs in one
    ``BEGIN IMMEDIATE`` transaction (the write lock), on PostgreSQL under a transaction-level
    advisory lock; the second caller waits and then finds nothing to do. Creates the parent
    directory of a SQLite file.

    Raises:
        ValueError: the URL is not supported (see ``Database.from_url``).
        StorageError: the database is unreachable or a migration failed.
    """
    target = parse_url(url, asynchronous=False)
    try:
        if target.get_backend_name() == "sqlite":
            _create_parent(target)
        engine = create_engine(target, poolclass=NullPool, **engine_arguments(target))
    except DRIVER_ERRORS as exc:
        raise StorageError(f"migration set-up failed: {describe_error(exc)}") from exc
    if target.get_backend_name() == "sqlite":
        configure_sqlite(engine)
    try:
        with engine.connect() as connection:
            connection = connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY}
                    )
                command.upgrade(alembic_config(connection), "head")
    except CommandError as exc:
        raise StorageError(f"migration failed: {exc}") from exc
    except DRIVER_ERRORS as exc:
        raise StorageError(f"migration failed: {describe_error(exc)}") from exc
    finally:
        engine.dispose()


def _create_parent(url: URL) -> None:
    database = url.database or ""
    if database and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
