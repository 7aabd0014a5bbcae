"""Signals that complete or fail rows waiting at a signal step.

A signal is first recorded in storage, atomically and only while the row still waits, so
two signals never complete one row and a signal is never lost. Then the in-process waiter,
if this process holds the row, is woken at once; otherwise the worker holding it finds the
outcome at its next storage poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.errors import StorageError
from bulkops.observability.metrics import Metrics
from bulkops.storage.ports import RowStore, WakeUps
from bulkops.storage.records import RowRecord, WaitOutcome
from bulkops.storage.states import ErrorType, RowState
from bulkops.storage.wakeups import NoWakeUps

MAX_MESSAGE = 2000


def scoped_key(operation_id: UUID, user_key: str, row_number: int) -> str:
    """The full signal key of a row: ``{operationId}:{userKey}:{rowNumber}``."""
    return f"{operation_id}:{user_key}:{row_number}"


def parse_scoped_key(key: str) -> tuple[UUID, int] | None:
    """Operation id and row number of a full signal key, or None when malformed."""
    head, _, tail = key.partition(":")
    _, _, number = tail.rpartition(":")
    try:
        return UUID(head), int(number)
    except ValueError:
        return None


def _outcome(succeeded: bool, message: str | None) -> Callable[[RowRecord], WaitOutcome]:
    """The end of a row's wait for a success (or failure with ``message``) signal."""
    at = utcnow()

    def outcome(row: RowRecord) -> WaitOutcome:
        return WaitOutcome(
            step_index=row.step_index,
            succeeded=succeeded,
            at=at,
            error_type=None if succeeded else ErrorType.SIGNAL_FAILURE,
            error_message=None if succeeded else (message or "")[:MAX_MESSAGE],
        )

    return outcome


class SignalHub:
    """In-process waiters by full signal key."""

    def __init__(self) -> None:
        self._waiters: dict[str, asyncio.Future[RowRecord]] = {}

    def register(self, key: str) -> asyncio.Future[RowRecord]:
        """A future resolved with the row's stored record when a signal arrives."""
        future: asyncio.Future[RowRecord] = asyncio.get_running_loop().create_future()
        self._waiters[key] = future
        return future

    def unregister(self, key: str) -> None:
        """Forget a waiter (the wait ended)."""
        self._waiters.pop(key, None)

    def waits(self, key: str) -> bool:
        """Whether a row of this process waits under ``key``."""
        return key in self._waiters

    def wake(self, key: str, row: RowRecord) -> bool:
        """Hand a resolved row to its waiter; False when this process holds none."""
        future = self._waiters.pop(key, None)
        if future is None or future.done():
            return False
        future.set_result(row)
        return True


@dataclass(frozen=True, slots=True)
class SignalResult:
    """What a signal did."""

    row: RowRecord
    completed: bool
    failed: bool
    cross_process: bool  # no waiter in this process: the holding worker polls storage


class SignalService:
    """Signal waiting rows, by full key (programmatic) or by user key (HTTP)."""

    def __init__(
        self,
        rows: RowStore,
        hub: SignalHub,
        wakeups: WakeUps | None = None,
        metrics: Metrics | None = None,
    ) -> None:
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
        self, operation_id: UUID, user_key: str, *, succeeded: bool, message: str | None = None
    ) -> SignalResult | None:
        """Complete (or fail) the row of ``operation_id`` that started waiting first under
        ``user_key``; None when no row waits for it."""
        resolved = await self._rows.resolve_first_waiting(
            operation_id, f"{operation_id}:{user_key}:", _outcome(succeeded, message)
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


class SignalWatch:
    """Finds signals another process recorded for the rows of one operation waiting here.

    One storage query per interval lists the operation's rows still waiting; a local
    waiter whose row is no longer among them was signalled (or failed) elsewhere and is
    woken with its stored record. However many rows wait, the cost is one query per
    interval, not one per row.
    """

    def __init__(
        self, rows: RowStore, hub: SignalHub, operation_id: UUID, *, interval: float
    ) -> None:
        self._rows = rows
        self._hub = hub
        self._operation_id = operation_id
        self._interval = interval
        self._keys: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, key: str, row_number: int) -> None:
        """Start watching a waiting row."""
        self._keys[key] = row_number
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def unwatch(self, key: str) -> None:
        """Stop watching (the wait ended)."""
        self._keys.pop(key, None)

    async def _still_waiting(self) -> set[str]:
        waiting = self._rows.iterate(self._operation_id, states=(RowState.WAITING_FOR_COMPLETION,))
        return {row.signal_key async for row in waiting if row.signal_key}

    async def _run(self) -> None:
        while self._keys:
            await asyncio.sleep(self._interval)
            try:
                waiting = await self._still_waiting()
                for key, number in list(self._keys.items()):
                    if key in waiting:
                        continue
                    stored = await self._rows.get_row(self._operation_id, number)
                    ended = stored is not None and (
                        stored.state is not RowState.WAITING_FOR_COMPLETION
                        or stored.signal_key != key
                    )
                    if ended and stored is not None and self._hub.wake(key, stored):
                        self._keys.pop(key, None)
            except StorageError:
                continue  # a transient outage; the next round looks again


async def deliver_signal(rows: RowStore, hub: SignalHub, key: str) -> bool:
    """Wake the row of this process waiting under ``key`` with its stored record, when
    another process recorded its signal (a wake-up notice named the key)."""
    parsed = parse_scoped_key(key)
    if parsed is None or not hub.waits(key):
        return False
    stored = await rows.get_row(*parsed)
    if stored is None or (
        stored.state is RowState.WAITING_FOR_COMPLETION and stored.signal_key == key
    ):
        return False  # not signalled after all (or not yet visible)
    return hub.wake(key, stored)
