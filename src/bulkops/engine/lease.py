"""Watching what a worker holds (an operation, or a chunk of one): heartbeats and checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.errors import StorageError
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


class Lease:
    """Renews the heartbeat of what a worker holds and reports when it stops holding it.

    ``on_lost`` is called once with the stored status when another party moved the
    operation on (e.g. a user cancelled it through another process), or with None when the
    record vanished or another worker took it (or its chunk) over. ``on_record`` sees the
    operation at every check. During a storage outage the checks fail quietly; the writes of
    the run decide how long to wait for storage.
    """

    def __init__(
        self,
        operations: OperationStore,
        chunks: ChunkStore,
        held: Held,
        *,
        check_interval: float,
        heartbeat_interval: float,
        on_lost: Callable[[OperationStatus | None], None],
        on_record: Callable[[OperationRecord], None] = lambda _: None,
    ) -> None:
        self._operations = operations
        self._chunks = chunks
        self._held = held
        self._check_interval = check_interval
        self._heartbeat_interval = heartbeat_interval
        self._on_lost = on_lost
        self._on_record = on_record

    async def _beat(self) -> bool:
        """Renew the heartbeat; False when the chunk is held by someone else."""
        held, now = self._held, utcnow()
        if held.chunk is None:
            await self._operations.heartbeat([held.operation_id], held.worker_id, now)
            return True
        return await self._chunks.heartbeat_chunk(
            held.operation_id, held.chunk, held.worker_id, now
        )

    async def run(self) -> None:
        """Loop until this worker no longer holds it or the task is cancelled."""
        last_beat = time.monotonic()
        while True:
            await asyncio.sleep(self._check_interval)
            try:
                if time.monotonic() - last_beat >= self._heartbeat_interval:
                    if not await self._beat():
                        self._on_lost(None)
                        return
                    last_beat = time.monotonic()
                record = await self._operations.get(self._held.operation_id)
            except StorageError:
                continue  # a transient outage; the next check tries again
            if self._lost(record):
                return

    def _lost(self, record: OperationRecord | None) -> bool:
        if record is None:
            self._on_lost(None)
            return True
        if self._held.chunk is None and record.worker_id != self._held.worker_id:
            self._on_lost(None)
            return True
        if record.status not in HELD_STATUSES:
            self._on_lost(record.status)
            return True
        self._on_record(record)
        return False
