"""Buffering row records and writing them in batches, one transaction per flush."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from bulkops.clock import utcnow
from bulkops.engine.events import operation_event
from bulkops.storage.ports import EventStore, RowStore
from bulkops.storage.records import EventRecord, OperationRecord, ProgressDelta, RowRecord
from bulkops.storage.states import EventType, OperationStatus, RowState, Severity


class RowRecorder:
    """Collects finished rows and flushes them with their counter increments.

    A flush happens when ``flush_rows`` records are buffered or ``flush_interval`` seconds
    have passed since the last one. Each flush reports the operation's stored status, so a
    cancellation recorded by another process is seen within one flush interval.
    """

    def __init__(
        self,
        operation: OperationRecord,
        rows: RowStore,
        events: EventStore,
        *,
        flush_rows: int,
        flush_interval: float,
    ) -> None:
        self._operation = operation
        self._rows = rows
        self._events = events
        self._flush_rows = flush_rows
        self._flush_interval = flush_interval
        self._buffer: list[RowRecord] = []
        self._last_flush = time.monotonic()
        self._in_flight: asyncio.Future[OperationStatus | None] | None = None
        self.status: OperationStatus | None = OperationStatus.RUNNING

    def add(self, record: RowRecord) -> None:
        """Buffer one row record."""
        self._buffer.append(record)

    @property
    def due(self) -> bool:
        """True when the buffer should be written now."""
        return len(self._buffer) >= self._flush_rows or (
            bool(self._buffer) and time.monotonic() - self._last_flush >= self._flush_interval
        )

    async def flush(self, *, wait: bool = True) -> OperationStatus | None:
        """Write buffered records, counters and RowFailed events.

        Writes run one at a time. With ``wait=False`` the new write goes on in the
        background, overlapping the processing of the next rows (the database works outside
        the interpreter lock), and the status returned is that of the previous write. With
        ``wait=True`` every buffered record is stored when this returns.
        """
        self._last_flush = time.monotonic()
        await self._settle()
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._in_flight = asyncio.ensure_future(self._write(batch, *self._tally(batch)))
            if wait:
                await self._settle()
        return self.status

    async def _settle(self) -> None:
        """Wait for the write in flight, if any, and take its status."""
        write, self._in_flight = self._in_flight, None
        if write is None:
            return
        # A cancellation must not tear a write: its batch has already left the buffer.
        try:
            self.status = await asyncio.shield(write)
        except asyncio.CancelledError:
            self.status = await write
            raise

    def _tally(self, batch: list[RowRecord]) -> tuple[ProgressDelta, list[EventRecord]]:
        processed = successful = failed = 0
        failures: list[EventRecord] = []
        now = utcnow()
        for record in batch:
            if record.state is RowState.COMPLETED:
                processed += 1
                successful += 1
            elif record.state is RowState.FAILED:
                processed += 1
                failed += 1
                failures.append(self._row_failed(record, now))
        delta = ProgressDelta(processed=processed, successful=successful, failed=failed)
        return delta, failures

    async def _write(
        self, batch: list[RowRecord], delta: ProgressDelta, failures: list[EventRecord]
    ) -> OperationStatus | None:
        status = await self._rows.save(self._operation.id, batch, delta)
        if failures:
            await self._events.append(failures)
        return status

    def _row_failed(self, record: RowRecord, now: datetime) -> EventRecord:
        error = record.error_type.value if record.error_type else "Error"
        return operation_event(
            self._operation,
            EventType.ROW_FAILED,
            f"Row {record.row_number} failed at {record.step_name} ({error}): "
            f"{record.error_message}",
            now,
            Severity.ERROR,
        )
