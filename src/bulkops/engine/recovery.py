"""Orphaned-step recovery: at start, fail what a crashed worker left Running."""

from __future__ import annotations

import logging
from datetime import datetime

from bulkops.engine.persistence import apply_change
from bulkops.errors import IllegalTransition, StorageError
from bulkops.storage import lifecycle
from bulkops.storage.ports import OperationStore, RowStore
from bulkops.storage.records import OperationRecord, RowRecord, WaitOutcome
from bulkops.storage.states import ErrorType, OperationStatus, RowState

log = logging.getLogger("bulkops.engine")

ROW_MESSAGE = "Recovery: step was waiting for signal when application restarted"
WAITING_MESSAGE = "Recovery: rows were waiting for signals when their worker stopped"
CRASHED_MESSAGE = "Recovery: operation was Running when its worker stopped"


class OrphanRecovery:
    """Fails Running operations whose worker is gone.

    A worker counts as gone when its heartbeat is older than ``orphan_age``; operations of
    live workers are never touched, however long their rows wait. Rows such an operation
    left waiting longer than ``orphan_age`` fail with error type SignalFailure.
    """

    def __init__(self, operations: OperationStore, rows: RowStore, *, orphan_age: float) -> None:
        self._operations = operations
        self._rows = rows
        self._orphan_age = orphan_age

    async def run(self, now: datetime) -> list[OperationRecord]:
        """Recover once; returns the operations failed. A storage outage is logged as a
        warning and ends recovery without raising."""
        try:
            recovered = []
            for record in await self._operations.running():
                if record.worker_id is None:
                    continue  # split into chunks: each is resumed on its own when its worker goes
                if self._age(record.heartbeat_at or record.started_at or record.created_at, now):
                    failed = await self._recover(record, now)
                    if failed is not None:
                        recovered.append(failed)
            return recovered
        except StorageError as exc:
            log.warning("Orphaned step recovery skipped: storage unavailable (%s)", exc)
            return []

    def _age(self, since: datetime, now: datetime) -> bool:
        return (now - since).total_seconds() > self._orphan_age

    async def _waiting_rows(self, record: OperationRecord) -> list[RowRecord]:
        # Listed in full before any is changed; waiting rows are few (at most the row
        # concurrency of the operation).
        waiting = self._rows.iterate(record.id, states=(RowState.WAITING_FOR_COMPLETION,))
        return [row async for row in waiting]

    async def _recover(self, record: OperationRecord, now: datetime) -> OperationRecord | None:
        failed_rows = 0
        for row in await self._waiting_rows(record):
            if row.waiting_since is None or not self._age(row.waiting_since, now):
                continue
            outcome = WaitOutcome(row.step_index, False, now, ErrorType.SIGNAL_FAILURE, ROW_MESSAGE)
            ended = await self._rows.resolve_wait(
                record.id, row.row_number, row.signal_key, outcome
            )
            failed_rows += ended is not None
        counts = await self._operations.counts(record.id)
        message = WAITING_MESSAGE if failed_rows else CRASHED_MESSAGE
        holder = record.worker_id

        def fail(current: OperationRecord) -> lifecycle.OperationChange | None:
            # Only while the gone worker still holds it: a resuming worker may have won.
            if current.status is not OperationStatus.RUNNING or current.worker_id != holder:
                return None
            return lifecycle.fail(current, message, now, counts)

        try:
            updated = await apply_change(self._operations, record.id, fail)
        except IllegalTransition:
            return None
        if updated is not None:
            log.warning("Recovered orphaned operation %s (%s)", record.id, message)
        return updated
