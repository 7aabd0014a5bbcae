"""``SqlStore``: OperationStore, RowStore and RetryStore in one object, on one database."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bulkops.storage.sql.chunks import ChunkMethods
from bulkops.storage.sql.deliveries import DeliveryMethods
from bulkops.storage.sql.fixes import FixMethods
from bulkops.storage.sql.keys import RateLimitMethods
from bulkops.storage.sql.mappings import MappingMethods
from bulkops.storage.sql.operations import OperationMethods
from bulkops.storage.sql.retry import RetryMethods
from bulkops.storage.sql.rows import RowMethods

if TYPE_CHECKING:
    from bulkops.storage.ports import (
        ChunkStore,
        MappingStore,
        OperationStore,
        RateLimitStore,
        RetryStore,
        RowStore,
    )


class SqlStore(
    OperationMethods,
    RowMethods,
    FixMethods,
    RetryMethods,
    RateLimitMethods,
    ChunkMethods,
    DeliveryMethods,
    MappingMethods,
):
    """Operations, their row records and retry rounds in SQLite or PostgreSQL.

    One object implements the three ports because a change, the rows it touches and its
    events are written in one transaction.

    Args:
        database: the shared engine wrapper (see ``Database.from_url``).
        event_log: a feed outside the database for the events of changes (the per-process
            memory feed); default: the ``events`` table, written in each change's
            transaction.
    """


if TYPE_CHECKING:

    def _implements_ports(
        store: SqlStore,
    ) -> tuple[OperationStore, RetryStore, RowStore, RateLimitStore, ChunkStore]:
        # mypy proves here that SqlStore satisfies the Protocols.
        return store, store, store, store, store

    def _implements_mappings(store: SqlStore) -> MappingStore:
        return store
