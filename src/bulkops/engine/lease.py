"""Watching an operation while a worker holds it: status checks and heartbeats."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.errors import StorageError
from bulkops.storage.ports import OperationStore
from bulkops.storage.states import OperationStatus


class Lease:
    """Renews the heartbeat of a held operation and reports when it stops being Running.

    ``on_lost`` is called once with the stored status (None when the record vanished) when
    another party moved the operation on, e.g. a user cancelled it through another process.
    """

    def __init__(
        self,
        operations: OperationStore,
        operation_id: UUID,
        worker_id: str,
        *,
        check_interval: float,
        heartbeat_interval: float,
        on_lost: Callable[[OperationStatus | None], None],
    ) -> None:
        self._operations = operations
        self._operation_id = operation_id
        self._worker_id = worker_id
        self._check_interval = check_interval
        self._heartbeat_interval = heartbeat_interval
        self._on_lost = on_lost

    async def run(self) -> None:
        """Loop until the operation is no longer Running or the task is cancelled."""
        last_beat = time.monotonic()
        while True:
            await asyncio.sleep(self._check_interval)
            try:
                if time.monotonic() - last_beat >= self._heartbeat_interval:
                    await self._operations.heartbeat(
                        [self._operation_id], self._worker_id, utcnow()
                    )
                    last_beat = time.monotonic()
                record = await self._operations.get(self._operation_id)
            except StorageError:
                continue  # a transient outage; the next check tries again
            if record is None or record.status is not OperationStatus.RUNNING:
                self._on_lost(record.status if record else None)
                return
