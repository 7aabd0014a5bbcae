"""SQL storage (SQLite and PostgreSQL) on SQLAlchemy Core, with Alembic migrations."""

from __future__ import annotations

from bulkops.storage.sql.database import Database
from bulkops.storage.sql.events import SqlEventStore
from bulkops.storage.sql.migrate import migrate
from bulkops.storage.sql.store import SqlStore

__all__ = ["Database", "SqlEventStore", "SqlStore", "migrate"]
