"""Signalling waiting rows by operation and user key (the HTTP use-case)."""

from __future__ import annotations

from uuid import UUID

from bulkops.engine.signals import SignalResult, SignalService
from bulkops.errors import BadRequest, NotFound
from bulkops.storage.ports import OperationStore

__all__ = ["SignalResult", "SignalUseCase"]


class SignalUseCase:
    """``POST /api/bulks/{id}/signal/{key}`` and ``.../fail``."""

    def __init__(self, operations: OperationStore, signals: SignalService) -> None:
        self._operations = operations
        self._signals = signals

    async def signal(
        self,
        operation_id: UUID,
        user_key: str,
        *,
        succeeded: bool,
        error_message: object = None,
    ) -> SignalResult:
        """Complete (or fail) the first row of the operation waiting under ``user_key``.

        Raises:
            NotFound: unknown operation, or no row waits for that key.
            BadRequest: a failure signal without a non-empty ``errorMessage`` string.
        """
        if not succeeded and (not isinstance(error_message, str) or not error_message.strip()):
            raise BadRequest("errorMessage must be a non-empty string")
        message = error_message if isinstance(error_message, str) else None
        result = await self._signals.signal_user_key(
            operation_id, user_key, succeeded=succeeded, message=message
        )
        if result is not None:
            return result
        # Only now tell an unknown operation from one with no row waiting for the key.
        if await self._operations.get(operation_id) is None:
            raise NotFound(f"Operation {operation_id} not found")
        raise NotFound(f"No row of operation {operation_id} is waiting for key {user_key!r}")
