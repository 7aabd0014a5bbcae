"""Reading the event feed."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from bulkops.errors import NotFound
from bulkops.storage.ports import EventStore, OperationStore
from bulkops.storage.records import EventRecord

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class FeedService:
    """Events across operations or of one operation."""

    def __init__(self, events: EventStore, operations: OperationStore) -> None:
        self._events = events
        self._operations = operations

    async def read(
        self,
        *,
        since: int | None = None,
        limit: int | None = None,
        operation_id: UUID | None = None,
        tenant: str | None = None,
        actor: str | None = None,
    ) -> Sequence[EventRecord]:
        """Events after the ``since`` cursor (exclusive), oldest first; without a cursor the
        newest ``limit`` (default 100, at most 1000). With ``tenant``, only the events of
        that tenant's operations (another tenant's operation is not found); with ``actor``,
        only the events it caused."""
        if operation_id is not None:
            record = await self._operations.get(operation_id)
            if record is None or (tenant is not None and record.tenant != tenant):
                raise NotFound(f"Operation {operation_id} not found")
        size = DEFAULT_LIMIT if limit is None else min(max(limit, 1), MAX_LIMIT)
        return await self._events.read(
            after=since, limit=size, operation_id=operation_id, tenant=tenant, actor=actor or None
        )
