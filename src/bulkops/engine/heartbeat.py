"""The process's one heartbeat: what its runs hold, renewed together, and checked.

Every run registers what it holds (``Held``: an operation, or one chunk of it) with the
process's ``Heartbeat`` for as long as it runs. One task beats for all of them: every
``heartbeat_interval`` every hold is renewed, in one statement per kind
(``OperationStore.heartbeat``, ``ChunkStore.heartbeat_chunks``); at every
``check_interval`` each held operation's record is read once, however many chunks of it
run here. A run is told (``Holder.lost``) once when it stops holding what it holds: its
chunk is held by another worker, its operation's record vanished, another worker took the
operation over, or its status is no longer a held one (e.g. a user cancelled it through
another process). During a storage outage the beats and checks fail quietly; the runs'
writes decide how long to wait for storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.errors import StorageError
from bulkops.storage.lanes import enter_processing_lane
from bulkops.storage.lifecycle import HELD_STATUSES
from bulkops.storage.ports import ChunkStore, OperationStore
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus


class LiveHolders(NamedTuple):
    """Holders storage knows alive now, and how old a heartbeat of theirs must be before
    their work is taken over all the same (a hung process must lose it in the end)."""

    ids: frozenset[str]
    before: datetime


@dataclass(frozen=True, slots=True)
class Held:
    """What a worker holds: the operation, or with ``chunk`` one chunk of it."""

    operation_id: UUID
    worker_id: str
    chunk: int | None = None


class Holder(Protocol):
    """A run holding something: what the heartbeat tells it."""

    def lost(self, status: OperationStatus | None) -> None:
        """It no longer holds it: the stored status moved on to ``status``, or (None) the
        record vanished or another worker holds it now. Told once."""

    def seen(self, record: OperationRecord) -> None:
        """The operation's record as read at a check, while it is still held."""


@dataclass(eq=False, slots=True)
class Hold:
    """One registration with the heartbeat; ``release`` ends it (idempotent)."""

    held: Held
    holder: Holder
    heartbeat: Heartbeat

    def release(self) -> None:
        """Stop beating for it and checking it."""
        self.heartbeat.forget(self)


class Heartbeat:
    """Renews the heartbeats of everything a process's runs hold, and tells each run when it
    lost what it holds (see the module's text). Its task runs while anything is held."""

    def __init__(
        self,
        operations: OperationStore,
        chunks: ChunkStore,
        *,
        check_interval: float,
        heartbeat_interval: float,
    ) -> None:
        self._operations = operations
        self._chunks = chunks
        self._check_interval = check_interval
        self._heartbeat_interval = heartbeat_interval
        self._holds: dict[Hold, None] = {}  # in registration order
        self._last_beat = time.monotonic()  # when every hold was last renewed
        self._task: asyncio.Task[None] | None = None

    def hold(self, held: Held, holder: Holder) -> Hold:
        """Beat for ``held`` and check it until the returned hold is released."""
        hold = Hold(held, holder, self)
        self._holds[hold] = None
        if self._task is None or self._task.done():
            # Its own context: not the log scope or span of the run that starts it.
            self._task = asyncio.create_task(self._run(), context=contextvars.Context())
        return hold

    def forget(self, hold: Hold) -> None:
        """End a hold (see ``Hold.release``)."""
        self._holds.pop(hold, None)

    @property
    def holding(self) -> int:
        """How many holds are registered."""
        return len(self._holds)

    async def close(self) -> None:
        """Stop the task (the process is stopping; its runs have ended)."""
        self._holds.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        enter_processing_lane()
        while True:
            await asyncio.sleep(self._check_interval)
            if not self._holds:
                return  # a new hold starts it again
            checked = await self._beat([*self._holds])
            await self._check(checked)

    async def _beat(self, holds: list[Hold]) -> list[Hold]:
        """Renew every hold's heartbeat when the process's beat is due (a hold registered
        since the last beat is renewed with the others: its claim set it just now); the
        holds to check now: none when storage failed the beat, never the lost ones."""
        if time.monotonic() - self._last_beat < self._heartbeat_interval:
            return holds
        now, lost = utcnow(), set[Hold]()
        try:
            for worker_id in {hold.held.worker_id for hold in holds}:
                mine = [hold for hold in holds if hold.held.worker_id == worker_id]
                whole = [hold.held.operation_id for hold in mine if hold.held.chunk is None]
                parts = {key: hold for hold in mine if (key := _chunk_of(hold.held)) is not None}
                if whole:
                    await self._operations.heartbeat(whole, worker_id, now)
                if parts:
                    beaten = await self._chunks.heartbeat_chunks(parts, worker_id, now)
                    lost.update(hold for key, hold in parts.items() if key not in beaten)
        except StorageError:
            return []  # a transient outage; the next check tries again
        self._last_beat = time.monotonic()
        for hold in lost:
            self._lose(hold, None)
        return [hold for hold in holds if hold not in lost]

    async def _check(self, holds: list[Hold]) -> None:
        """Read each held operation's record once and tell its holders what it shows."""
        records: dict[UUID, OperationRecord | None] = {}
        for hold in holds:
            if hold not in self._holds:
                continue  # released (or lost) meanwhile
            operation_id = hold.held.operation_id
            if operation_id not in records:
                try:
                    records[operation_id] = await self._operations.get(operation_id)
                except StorageError:
                    continue  # a transient outage; the next check tries again
            if hold in self._holds:
                self._tell(hold, records[operation_id])

    def _tell(self, hold: Hold, record: OperationRecord | None) -> None:
        held = hold.held
        if record is None:
            self._lose(hold, None)
        elif held.chunk is None and record.worker_id != held.worker_id:
            self._lose(hold, None)
        elif record.status not in HELD_STATUSES:
            self._lose(hold, record.status)
        else:
            hold.holder.seen(record)

    def _lose(self, hold: Hold, status: OperationStatus | None) -> None:
        self.forget(hold)
        hold.holder.lost(status)


def _chunk_of(held: Held) -> tuple[UUID, int] | None:
    return None if held.chunk is None else (held.operation_id, held.chunk)
