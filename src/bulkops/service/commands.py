"""Write use-cases on existing operations."""

from __future__ import annotations

from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.events import finished
from bulkops.errors import Conflict, NotFound
from bulkops.storage.ports import EventStore, OperationStore
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus


class CommandService:
    """Cancel (retry and signals arrive in later modules)."""

    def __init__(self, operations: OperationStore, events: EventStore) -> None:
        self._operations = operations
        self._events = events

    async def cancel(self, operation_id: UUID) -> OperationRecord:
        """Cancel a Pending, Running or Retrying operation at once in storage.

        A worker holding it notices at its next status check and stops; rows not yet
        processed stay unprocessed.

        Raises:
            NotFound: unknown operation.
            Conflict: the operation already reached a terminal status.
        """
        now = utcnow()
        updated = await self._operations.transition(operation_id, OperationStatus.CANCELLED, now)
        if updated is None:
            current = await self._operations.get(operation_id)
            if current is None:
                raise NotFound(f"Operation {operation_id} not found")
            raise Conflict(
                f"Operation is already {current.status.value} and cannot be cancelled",
                status=current.status.value,
            )
        await self._events.append([finished(updated, now)])
        return updated
