"""Write use-cases on existing operations."""

from __future__ import annotations

from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.persistence import apply_change
from bulkops.errors import Conflict, IllegalTransition, NotFound
from bulkops.storage import lifecycle
from bulkops.storage.ports import OperationStore
from bulkops.storage.records import OperationRecord


class CommandService:
    """Cancel (retry and signals have their own services)."""

    def __init__(self, operations: OperationStore) -> None:
        self._operations = operations

    async def cancel(
        self, operation_id: UUID, *, actor: str = "system", action_id: UUID | None = None
    ) -> OperationRecord:
        """Cancel a Pending, Running or Retrying operation at once in storage.

        A worker holding it notices at its next status check and stops; rows not yet
        processed stay unprocessed.

        ``actor`` caused it (its events say so); ``action_id``: the bulk action cancelling
        it, recorded as its ``last_action_id`` with the cancel.

        Raises:
            NotFound: unknown operation.
            Conflict: the operation already reached a terminal status.
        """
        now = utcnow()
        try:
            updated = await apply_change(
                self._operations,
                operation_id,
                lambda current: lifecycle.attributed(
                    lifecycle.cancel(current, now, action_id=action_id), actor
                ),
            )
        except IllegalTransition:
            current = await self._operations.get(operation_id)
            status = current.status.value if current else "finished"
            raise Conflict(
                f"Operation is already {status} and cannot be cancelled", status=status
            ) from None
        if updated is None:
            raise NotFound(f"Operation {operation_id} not found")
        return updated
