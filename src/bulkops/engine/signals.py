"""The engine's side of signals: rows waiting here, and the signals that reach them.

A signal is recorded in storage by ``bulkops.service.signals.SignalService`` first; then
the in-process waiter (``SignalHub``), if this process holds the row, is woken at once;
otherwise the worker holding it finds the outcome by its storage poll (``SignalWatch``) or
a wake-up notice (``deliver_signal``).
"""

from __future__ import annotations

import asyncio
from uuid import UUID

from bulkops.errors import StorageError
from bulkops.storage.ports import RowStore
from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState


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


class SignalDelivery:
    """Delivers the signals other processes announce (wake-up notices naming a key) to the
    rows of this process waiting under them, each in a task of its own; a delivery that
    storage fails is left to the operation's ``SignalWatch``."""

    def __init__(self, rows: RowStore, hub: SignalHub) -> None:
        self._rows = rows
        self._hub = hub
        self._delivering: set[asyncio.Task[None]] = set()

    def heard(self, key: str) -> None:
        """A notice named ``key``: deliver it when a row here waits under it."""
        if self._hub.waits(key):
            task = asyncio.create_task(self._quietly_deliver(key))
            self._delivering.add(task)
            task.add_done_callback(self._delivering.discard)

    async def _quietly_deliver(self, key: str) -> None:
        try:
            await deliver_signal(self._rows, self._hub, key)
        except StorageError:
            pass  # the operation's signal watch finds it at its next poll
