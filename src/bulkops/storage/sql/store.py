"""``SqlStore``: OperationStore, RowStore and RetryStore in one object, on one database."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from bulkops.storage.records import OperationRecord
from bulkops.storage.sql.database import Database
from bulkops.storage.sql.operations import OperationMethods
from bulkops.storage.sql.retry import RetryMethods
from bulkops.storage.sql.rows import RowMethods

if TYPE_CHECKING:
    from bulkops.storage.ports import OperationStore, RetryStore, RowStore


class SqlStore(OperationMethods, RowMethods, RetryMethods):
    """Operations and their row records in SQLite or PostgreSQL.

    One object implements both ports because ``save`` updates an operation's counters in the
    same transaction as its rows.

    Args:
        database: the shared engine wrapper (see ``Database.from_url``).
    """

    def __init__(self, database: Database) -> None:
        self._db = database

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        """The operation record, or None when unknown."""
        return await self._get_operation(operation_id)


if TYPE_CHECKING:

    def _implements_ports(store: SqlStore) -> tuple[OperationStore, RowStore, RetryStore]:
        # mypy proves here that SqlStore satisfies the Protocols.
        return store, store, store
