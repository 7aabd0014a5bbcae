"""Buffering one run's finished rows for the process's writer (``engine/writer.py``)."""

from __future__ import annotations

import asyncio
from datetime import datetime

from bulkops.clock import utcnow
from bulkops.definition.operation import PROCESS_STEP
from bulkops.engine.ports import StoredFor
from bulkops.engine.writer import Outcome, RowWriter, Taken
from bulkops.storage.lifecycle import row_failed_event
from bulkops.storage.records import (
    CompletedSpan,
    EventRecord,
    Fence,
    OperationRecord,
    ProgressDelta,
    RowRecord,
    RowWrite,
)
from bulkops.storage.spans import Span, append_span
from bulkops.storage.states import RowState

# Plain completions are spans of row numbers, a few bytes each: the writer may fall further
# behind on them before the producer waits, and then writes them in fewer, larger
# transactions. Holding the producer at twice ``flush_rows`` made the 1M-row import wait
# for a transaction every ~1,400 rows; at eight times it runs on (scenario 1: 113k to
# 126-132k rows/s).
SPAN_ROOM = 8


class RowRecorder:
    """Collects one run's finished rows for the process's ``RowWriter``, which stores them
    with their counter increments and RowFailed events, fenced by ``fence``.

    The buffer holds up to twice ``flush_rows`` records (twice ``hold_after`` when that is
    more; or ``SPAN_ROOM`` times ``flush_rows`` rows, when most are plain completions held
    as spans of row numbers); beyond, and while the writer holds every producer (storage
    unreachable, or a slow write with the process's unstored rows at its limit),
    ``wait_room`` holds the producer: reading stops, memory stays bounded.
    ``hold_after`` (MaxRowConcurrency) is this run's part of that limit.

    Each write reports the operation's stored status to its run (``run``: ``lost``, None
    when this worker no longer holds the operation), so a cancellation recorded by another
    process is seen at the next write; a write that could not be stored goes to its
    ``unstored``.
    """

    def __init__(
        self,
        operation: OperationRecord,
        writer: RowWriter,
        *,
        fence: Fence,
        flush_rows: int,
        hold_after: int = 0,
        run: StoredFor,
        completed_step: tuple[str, int] | None = None,
    ) -> None:
        # The step (name, index) plain completions are stored at: ``process`` (0), or
        # ``validation`` (-1) for a dry run's.
        self._step_name, self._step_index = completed_step or (PROCESS_STEP, 0)
        self._operation = operation
        self._writer = writer
        self._fence = fence
        self.failed_written = 0  # failed rows this recorder has stored
        self._flush_rows = flush_rows
        self.hold_after = hold_after  # rows unstored during a slow write (0: no limit)
        self._run = run
        self._buffer: list[RowRecord] = []
        # Plain completed rows as spans [first, last, completed_at]: no record per row.
        self._spans: list[Span] = []
        self._span_rows = 0
        self._room = asyncio.Event()
        self._room.set()
        # Rows that finish together are written together, whatever ``flush_rows``: at 1 a
        # write of two would hold the producer at each commit's latency.
        self._records_room = 2 * max(flush_rows, hold_after)
        self._joined = False
        self._writing = False  # a write of its rows is in flight
        self._drained = asyncio.Event()  # closing, with nothing buffered or in a write
        self._closing = False
        self._error: BaseException | None = None  # why its rows could not be stored

    @property
    def buffered_rows(self) -> int:
        """Rows buffered, not yet in a write."""
        return len(self._buffer) + self._span_rows

    def start(self) -> None:
        """Join the process's writer."""
        if not self._joined and not self._closing:
            self._joined = True
            self._writer.join(self)

    def add(self, record: RowRecord) -> None:
        """Buffer one row record."""
        self._buffer.append(record)
        self._writer.added(1)
        if not self._has_room():
            self._room.clear()

    def add_span(self, first: int, last: int, at: datetime) -> None:
        """Buffer rows ``first`` to ``last``, each completed at its one step at ``at`` with
        nothing else to record (stored exactly as its plain row record would be)."""
        append_span(self._spans, first, last, at)
        count = last - first + 1
        self._span_rows += count
        self._writer.added(count)
        if not self._has_room():
            self._room.clear()

    def _has_room(self) -> bool:
        """Below the records' room and ``SPAN_ROOM`` times ``flush_rows`` rows, and the
        writer not holding every producer."""
        buffered = len(self._buffer)
        return (
            buffered < self._records_room
            and buffered + self._span_rows < SPAN_ROOM * self._flush_rows
            and self._writer.open
        ) or self._error is not None

    def refresh(self) -> None:
        """Let the producer on, or hold it, as the room is now (the writer calls it)."""
        if self._has_room():
            self._room.set()
        else:
            self._room.clear()

    @property
    def full(self) -> bool:
        """True when the producer must wait for a write before adding more."""
        return not self._room.is_set()

    async def wait_room(self) -> None:
        """Wait until the buffer has room again; raises the error that kept its rows out of
        storage (storage stayed unreachable)."""
        await self._room.wait()
        if self._error is not None:
            raise self._error

    async def close(self) -> None:
        """Store everything buffered and leave the writer; raises the error that kept its
        rows out of storage."""
        if self._joined:
            self._closing = True
            if not (self._writing or self._buffer or self._spans):
                self._drained.set()
            await self._drained.wait()
            self._leave()
        if self._error is not None:
            raise self._error

    async def abandon(self) -> None:
        """Leave the writer without waiting for storage (the buffer is given up)."""
        self._leave()

    def _leave(self) -> None:
        if self._joined:
            self._joined = False
            self._closing = True
            self._writer.leave(self)
            self._buffer, self._spans, self._span_rows = [], [], 0

    def take(self) -> Taken | None:
        """The buffered rows as one write, or None when nothing is buffered (the writer
        calls it as a write begins)."""
        if not (self._buffer or self._spans):
            return None
        batch = self._buffer[: self._records_room]
        del self._buffer[: len(batch)]
        spans, counted = self._spans, self._span_rows
        self._spans, self._span_rows = [], 0
        delta, failures = self._tally(batch)
        delta = ProgressDelta(delta.processed + counted, delta.successful + counted, delta.failed)
        name, index = self._step_name, self._step_index
        completed = [CompletedSpan(first, last, name, at, index) for first, last, at in spans]
        write = RowWrite(
            self._operation.id, batch, delta, failures, fence=self._fence, completed=completed
        )
        self._writing = True
        return Taken(write, len(batch) + counted)

    def stored(self, taken: Taken, outcome: Outcome) -> None:
        """The outcome of the write of ``taken``: the operation's status after it (None:
        not held), or the error that kept it out (the writer calls it)."""
        self._writing = False
        if not self._joined:
            return  # abandoned meanwhile: its run has ended
        if isinstance(outcome, BaseException):
            self.failed(outcome)
            return
        if outcome is not None and not outcome.is_terminal:  # final: nothing was written
            delta = taken.write.delta
            self.failed_written += delta.failed
            self._writer.rows_done(self._operation.operation_name, delta)
        if self._closing and not (self._buffer or self._spans):
            self._drained.set()
        self._run.lost(outcome)

    def failed(self, error: BaseException) -> None:
        """Its rows could not be stored: the producer is let on to meet ``error``."""
        if self._error is None:
            self._error = error
            self._run.unstored(error)
        self._room.set()
        self._drained.set()

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
