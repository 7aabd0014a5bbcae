"""Buffering row records and writing them in batches, one transaction per flush."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bulkops.clock import utcnow
from bulkops.definition.operation import PROCESS_STEP
from bulkops.engine.persistence import StorageRetry
from bulkops.errors import StorageUnavailable
from bulkops.observability.metrics import Metrics
from bulkops.storage.lifecycle import row_failed_event
from bulkops.storage.ports import RowStore
from bulkops.storage.records import (
    CompletedSpan,
    EventRecord,
    Fence,
    OperationRecord,
    ProgressDelta,
    RowRecord,
)
from bulkops.storage.spans import Span, append_span
from bulkops.storage.states import OperationStatus, RowState

# Plain completions are spans of row numbers, a few bytes each: the writer may fall further
# behind on them before the producer waits, and then writes them in fewer, larger
# transactions. Holding the producer at twice ``flush_rows`` made the 1M-row import wait
# for a transaction every ~1,400 rows; at eight times it runs on (scenario 1: 113k to
# 126-132k rows/s).
SPAN_ROOM = 8
# A write in flight longer than this is slow: the producer then waits for it while
# ``hold_after`` rows (MaxRowConcurrency) are not stored, so a crash during a slow write (a
# loaded or locked database) loses about the rows in flight, not all that ran meanwhile.
SLOW_WRITE = 0.01


class RowRecorder:
    """Collects finished rows; a writer task stores them with their counter increments and
    RowFailed events, one transaction per batch.

    The writer writes whatever is buffered as soon as its previous write is done (group
    commit): a finished row waits at most for the write in flight before its own begins,
    so a crash of the process loses the rows that finished during one write, not a batch
    of ``flush_rows``. Batches grow on their own when rows finish faster than writes take.
    Writes overlap the processing of the next rows: the buffer is emptied when a write
    begins, and refills meanwhile. The buffer holds up to twice ``flush_rows`` records
    (twice ``hold_after`` when that is more; or ``SPAN_ROOM`` times ``flush_rows`` rows, when
    most are plain completions held as spans of row numbers); beyond, ``wait_room`` holds
    the producer (reading stops, memory stays bounded: the buffer and the batch in
    flight). A write slower than ``SLOW_WRITE`` holds it once ``hold_after`` rows are not
    stored, and a write that fails because storage is unreachable holds it at once: no row
    starts whose outcome could not be stored, so a crash or an outage that outlasts the
    holder's lease costs about the rows that were running, not all that ran meanwhile.

    Each write reports the operation's stored status to ``on_status`` (None when this
    worker no longer holds the operation), so a cancellation recorded by another process is
    seen at the next write.
    """

    def __init__(
        self,
        operation: OperationRecord,
        rows: RowStore,
        *,
        fence: Fence,
        flush_rows: int,
        retry: StorageRetry,
        hold_after: int = 0,
        on_status: Callable[[OperationStatus | None], None],
        on_failure: Callable[[BaseException], None],
        metrics: Metrics | None = None,
        completed_step: tuple[str, int] | None = None,
    ) -> None:
        self._metrics = metrics or Metrics()
        # The step (name, index) plain completions are stored at: ``process`` (0), or
        # ``validation`` (-1) for a dry run's.
        self._step_name, self._step_index = completed_step or (PROCESS_STEP, 0)
        self._operation = operation
        self._rows = rows
        self._fence = fence
        self.failed_written = 0  # failed rows this recorder has stored
        self._flush_rows = flush_rows
        self._retry = retry
        self._on_status = on_status
        self._on_failure = on_failure
        self._buffer: list[RowRecord] = []
        # Plain completed rows as spans [first, last, completed_at]: no record per row.
        self._spans: list[Span] = []
        self._span_rows = 0
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._closing = False
        self._stalled = False  # the write in flight met an unreachable storage
        self._hold_after = hold_after  # rows buffered behind a slow write (0: no limit)
        # Rows that finish together are written together, whatever ``flush_rows``: at 1 a
        # write of two would hold the producer at each commit's latency.
        self._records_room = 2 * max(flush_rows, hold_after)
        self._slow = False  # the write in flight is slow
        self._in_write = 0  # rows of the write in flight
        self._writer: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the writer task."""
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop())
            self._writer.add_done_callback(self._writer_done)

    def _writer_done(self, writer: asyncio.Task[None]) -> None:
        if not writer.cancelled() and writer.exception() is not None:
            self._on_failure(writer.exception())  # type: ignore[arg-type]

    def add(self, record: RowRecord) -> None:
        """Buffer one row record."""
        buffer = self._buffer
        buffer.append(record)
        size = len(buffer) + self._span_rows
        if size == 1:
            self._wake.set()  # the writer waits only on an empty buffer
        if (size >= self._flush_rows or self._slow) and not self._has_room():
            self._room.clear()

    def add_span(self, first: int, last: int, at: datetime) -> None:
        """Buffer rows ``first`` to ``last``, each completed at its one step at ``at`` with
        nothing else to record (stored exactly as its plain row record would be)."""
        append_span(self._spans, first, last, at)
        self._span_rows += last - first + 1
        self._wake.set()
        size = len(self._buffer) + self._span_rows
        if (size >= self._flush_rows or self._slow) and not self._has_room():
            self._room.clear()

    def _has_room(self) -> bool:
        """Below the records' room and ``SPAN_ROOM`` times ``flush_rows`` rows,
        storage answering, and below ``hold_after`` rows unstored during a slow write."""
        buffered = len(self._buffer)
        rows = buffered + self._span_rows
        return (
            not self._stalled
            and buffered < self._records_room
            and rows < SPAN_ROOM * self._flush_rows
            and not (self._slow and rows + self._in_write >= self._hold_after)
        )

    def _overdue(self) -> None:
        """The write in flight is slow: hold the producer once enough rows wait."""
        self._slow = True
        if not self._has_room():
            self._room.clear()

    @property
    def full(self) -> bool:
        """True when the producer must wait for a write before adding more."""
        return not self._room.is_set()

    async def wait_room(self) -> None:
        """Wait until the buffer has room again; raises the writer's error if it failed."""
        writer = self._writer
        if writer is None:
            return
        room = asyncio.ensure_future(self._room.wait())
        try:
            await asyncio.wait({room, writer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            room.cancel()
        if writer.done():
            writer.result()  # the writer gave up: storage stayed unreachable

    async def close(self) -> None:
        """Write everything buffered and stop the writer; raises its error if it failed."""
        writer = self._writer
        if writer is None:
            return
        self._closing = True
        self._wake.set()
        await asyncio.shield(writer)

    async def abandon(self) -> None:
        """Stop the writer without waiting for storage (the buffer is given up)."""
        writer = self._writer
        if writer is not None and not writer.done():
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer

    async def _write_loop(self) -> None:
        while True:
            if not (self._buffer or self._spans):
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()  # the first row buffered (or close) wakes it
                continue
            batch = self._buffer[: self._records_room]
            del self._buffer[: len(batch)]
            spans, counted = self._spans, self._span_rows
            self._spans, self._span_rows = [], 0
            if self._has_room():
                self._room.set()  # the producer refills the buffer during the write
            timer, self._in_write = None, len(batch) + counted
            if self._hold_after:
                timer = asyncio.get_running_loop().call_later(SLOW_WRITE, self._overdue)
            try:
                await self._write(batch, spans, counted)
            finally:
                if timer is not None:
                    timer.cancel()
                self._slow, self._in_write = False, 0
            if self._has_room():
                self._room.set()

    async def _save(self, *args: Any, **kwargs: Any) -> OperationStatus | None:
        """One try of the write; an unreachable storage holds the producer until a try
        succeeds."""
        try:
            status = await self._rows.save(*args, **kwargs)
        except StorageUnavailable:
            if not self._stalled:
                self._stalled = True
                self._room.clear()
            raise
        if self._stalled:
            self._stalled = False
            if self._has_room():
                self._room.set()
        return status

    async def _write(self, batch: list[RowRecord], spans: list[Span], counted: int) -> None:
        delta, failures = self._tally(batch)
        delta = ProgressDelta(delta.processed + counted, delta.successful + counted, delta.failed)
        name, index = self._step_name, self._step_index
        completed = [CompletedSpan(first, last, name, at, index) for first, last, at in spans]
        started = time.perf_counter()
        # A cancellation of this task must not tear a write whose batch left the buffer.
        status = await asyncio.shield(
            self._retry.call(
                self._save,
                self._operation.id,
                batch,
                delta,
                failures,
                fence=self._fence,
                completed=completed,
            )
        )
        self._metrics.write_took(time.perf_counter() - started)
        if status is not None:
            self.failed_written += delta.failed
            self._metrics.rows_done(self._operation.operation_name, delta.successful, delta.failed)
        self._on_status(status)

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
                failures.append(row_failed_event(self._operation, record, now))
        delta = ProgressDelta(processed=processed, successful=successful, failed=failed)
        return delta, failures
