"""Schema migrations: Alembic, configured in code, run under a cross-process lock.

Alembic is imported only by ``migrate`` and ``alembic_config``: the schema checks of a
process that does not migrate read the revisions from the migration files (``revisions``),
and ``serve`` migrates a new database in a child process (``migrate_apart``).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import NullPool, create_engine, inspect, text
from sqlalchemy.engine import URL, Connection

from bulkops.errors import StorageError
from bulkops.storage.sql.database import (
    WRITE_OPTION,
    configure_sqlite,
    describe_error,
    driver_errors,
    engine_arguments,
    parse_url,
)
from bulkops.storage.sql.revisions import head_revision, known_revisions

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
MIGRATE_APART_TIMEOUT = 600.0  # seconds ``migrate_apart`` waits for its child process

# Key of the PostgreSQL advisory lock that serialises concurrent migrate() calls
# (an arbitrary constant: the bytes of "bulkops" read as an integer).
ADVISORY_LOCK_KEY = int.from_bytes(b"bulkops", "big")


class SchemaMismatch(StorageError):
    """The database's schema revision is not the one this code was written for (older: run
    ``bulkops migrate``; newer: this code is older than the database, as during a rolling
    deploy, and must not write to it). The message names both revisions."""

    def __init__(self, message: str, *, database: str | None, code: str) -> None:
        super().__init__(message)
        self.database = database
        self.code = code


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for the packaged migrations (no alembic.ini needed).

    Args:
        connection: the connection ``env.py`` runs on; required for commands that touch a
            database.
    """
    from alembic.config import Config

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
    except driver_errors() as exc:
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
                found = _revision_on(connection)
                refuse_newer(found)
                # At the head there is nothing to run: Alembic is not even imported.
                if found != head_revision():
                    _upgrade(connection)
    except driver_errors() as exc:
        raise StorageError(f"migration failed: {describe_error(exc)}") from exc
    finally:
        engine.dispose()


def migrate_apart(url: str, found: str | None) -> None:
    """``migrate`` in a child process when the database at ``url`` (at revision ``found``)
    is behind the code, so that a long-lived caller never holds Alembic in its memory
    (about 10 MB: ``serve``'s HTTP process on a new database). Best effort: a failure is
    left for the caller's own ``migrate`` to meet and report."""
    if found == head_revision():
        return
    code = "import sys; from bulkops.storage.sql.migrate import migrate; migrate(sys.argv[1])"
    command = [sys.executable, "-c", code, url]
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(command, capture_output=True, check=False, timeout=MIGRATE_APART_TIMEOUT)


def _upgrade(connection: Connection) -> None:
    """Run Alembic's upgrade to the head on ``connection`` (in its transaction)."""
    from alembic import command
    from alembic.util import CommandError

    try:
        command.upgrade(alembic_config(connection), "head")
    except CommandError as exc:
        raise StorageError(f"migration failed: {exc}") from exc


def schema_revision(url: str) -> str | None:
    """The schema revision the database at ``url`` is at (None: no bulkops schema).

    Raises:
        ValueError: the URL is not supported.
        StorageError: the database is unreachable.
    """
    target = parse_url(url, asynchronous=False)
    if target.get_backend_name() == "sqlite" and not _sqlite_file_exists(target):
        return None  # not created by looking
    try:
        engine = create_engine(target, poolclass=NullPool, **engine_arguments(target))
        try:
            with engine.connect() as connection:
                return _revision_on(connection)
        finally:
            engine.dispose()
    except driver_errors() as exc:
        raise StorageError(f"reading the schema revision failed: {describe_error(exc)}") from exc


def check_schema(url: str) -> str:
    """Make sure the database at ``url`` is at the schema revision this code expects, for a
    process that does not migrate at start. Returns that revision.

    Raises:
        SchemaMismatch: the database is at another revision (or has no schema); the message
            names both and says what to do.
        StorageError: the database is unreachable.
    """
    database, code = schema_revision(url), head_revision()
    if database == code:
        return code
    refuse_newer(database)
    found = "no bulkops schema" if database is None else f"schema revision {database}"
    raise SchemaMismatch(
        f"the database has {found}, older than this bulkops (schema revision {code}): "
        "run `bulkops migrate` (with this version of bulkops) before starting it",
        database=database,
        code=code,
    )


def _revision_on(connection: Connection) -> str | None:
    """The revision in Alembic's version table, read on ``connection`` (None: no table)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return max(found) if found else None


def refuse_newer(database: str | None) -> None:
    """Raise ``SchemaMismatch`` when the database is at a revision this code does not know:
    a newer bulkops migrated it (say, mid-way through a rolling deploy)."""
    if database is None or database in known_revisions():
        return
    code = head_revision()
    raise SchemaMismatch(
        f"the database has schema revision {database}, newer than this bulkops knows (its "
        f"newest is schema revision {code}): run the newer bulkops that migrated it, or "
        "restore the database from before that upgrade",
        database=database,
        code=code,
    )


def _sqlite_file_exists(url: URL) -> bool:
    database = url.database or ""
    return database.startswith("file:") or Path(database).expanduser().exists()


def _create_parent(url: URL) -> None:
    database = url.database or ""
    if database and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
