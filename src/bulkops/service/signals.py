"""Signals that complete or fail rows waiting at a signal step.

A signal is first recorded in storage, atomically and only while the row still waits, so
two signals never complete one row and a signal is never lost. Then the in-process waiter,
if this process holds the row, is woken at once; otherwise the worker holding it finds the
outcome at its next storage poll.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.signals import SignalHub, parse_scoped_key
from bulkops.errors import BadRequest, NotFound
from bulkops.observability.metrics import Metrics
from bulkops.storage.ports import OperationStore, RowStore, WakeUps
from bulkops.storage.records import RowRecord, WaitOutcome
from bulkops.storage.states import ErrorType, RowState
from bulkops.storage.wakeups import NoWakeUps

__all__ = ["MAX_MESSAGE", "SignalResult", "SignalService"]

MAX_MESSAGE = 2000  # characters of a failure signal's message that are kept


def _outcome(
    succeeded: bool, message: str | None, actor: str | None = None
) -> Callable[[RowRecord], WaitOutcome]:
    """The end of a row's wait for a success (or failure with ``message``) signal sent by
    ``actor`` (None: by code, not a request)."""
    at = utcnow()

    def outcome(row: RowRecord) -> WaitOutcome:
        return WaitOutcome(
            step_index=row.step_index,
            succeeded=succeeded,
            at=at,
            error_type=None if succeeded else ErrorType.SIGNAL_FAILURE,
            error_message=None if succeeded else (message or "")[:MAX_MESSAGE],
            actor=actor,
        )

    return outcome


@dataclass(frozen=True, slots=True)
class SignalResult:
    """What a signal did."""

    row: RowRecord
    completed: bool
    failed: bool
    cross_process: bool  # no waiter in this process: the holding worker polls storage


class SignalService:
    """Signal waiting rows: by full key (``signal_success``, ``signal_failure``: for code)
    or by operation and user key (``signal``: ``POST /api/bulks/{id}/signal/{key}``).

    Reach it as ``app.state.signals`` or ``Worker.signals``.
    """

    def __init__(
        self,
        rows: RowStore,
        hub: SignalHub,
        wakeups: WakeUps | None = None,
        metrics: Metrics | None = None,
        *,
        operations: OperationStore | None = None,
    ) -> None:
        self._operations = operations
        self._rows = rows
        self._hub = hub
        self._wakeups = wakeups or NoWakeUps()
        self._metrics = metrics or Metrics()

    async def _resolve(
        self, row: RowRecord, succeeded: bool, message: str | None
    ) -> SignalResult | None:
        resolved = await self._rows.resolve_wait(
            row.operation_id, row.row_number, row.signal_key, _outcome(succeeded, message)(row)
        )
        return None if resolved is None else await self._resolved(resolved, succeeded)

    async def _resolved(self, resolved: RowRecord, succeeded: bool) -> SignalResult:
        """Count the signal and wake the row's waiter, here or in its worker."""
        self._metrics.signal("success" if succeeded else "failure")
        key = resolved.signal_key
        woken = key is not None and self._hub.wake(key, resolved)
        if not woken and key is not None:
            await self._wakeups.announce_signal(key)  # its worker is elsewhere
        return SignalResult(resolved, succeeded, not succeeded, cross_process=not woken)

    async def signal_user_key(
        self,
        operation_id: UUID,
        user_key: str,
        *,
        succeeded: bool,
        message: str | None = None,
        actor: str | None = None,
    ) -> SignalResult | None:
        """Complete (or fail) the row of ``operation_id`` that started waiting first under
        ``user_key``, on behalf of ``actor``; None when no row waits for it."""
        resolved = await self._rows.resolve_first_waiting(
            operation_id, f"{operation_id}:{user_key}:", _outcome(succeeded, message, actor)
        )
        if resolved is None:
            self._metrics.signal("unmatched")
            return None
        return await self._resolved(resolved, succeeded)

    async def _by_full_key(self, key: str, succeeded: bool, message: str | None) -> bool:
        parsed = parse_scoped_key(key)
        if parsed is None:
            return False
        row = await self._rows.get_row(*parsed)
        if row is None or row.state is not RowState.WAITING_FOR_COMPLETION:
            return False
        if row.signal_key != key:
            return False
        return await self._resolve(row, succeeded, message) is not None

    async def signal_success(self, key: str) -> bool:
        """Complete the waiting step of the row with this FULL scoped key; True when a
        waiting row was found and signalled."""
        return await self._by_full_key(key, True, None)

    async def signal_failure(self, key: str, message: str) -> bool:
        """Fail the waiting step of the row with this FULL scoped key with ``message``;
        True when a waiting row was found and signalled."""
        return await self._by_full_key(key, False, message)

    async def signal(
        self,
        operation_id: UUID,
        user_key: str,
        *,
        succeeded: bool,
        error_message: object = None,
        actor: str | None = None,
    ) -> SignalResult:
        """Complete (or fail) the first row of the operation waiting under ``user_key``;
        ``actor`` (the requester) is the actor of the RowFailed event a failure causes.

        Raises:
            NotFound: unknown operation, or no row waits for that key.
            BadRequest: a failure signal without a non-empty ``errorMessage`` string.
        """
        if not succeeded and (not isinstance(error_message, str) or not error_message.strip()):
            raise BadRequest("errorMessage must be a non-empty string")
        message = error_message if isinstance(error_message, str) else None
        result = await self.signal_user_key(
            operation_id, user_key, succeeded=succeeded, message=message, actor=actor
        )
        if result is not None:
            return result
        # Only now tell an unknown operation from one with no row waiting for the key.
        if self._operations is not None and await self._operations.get(operation_id) is None:
            raise NotFound(f"Operation {operation_id} not found")
        raise NotFound(f"No row of operation {operation_id} is waiting for key {user_key!r}")
