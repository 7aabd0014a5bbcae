"""The scope of a whole operation's run: processing one claimed operation, its first rows,
then the rest itself or split into chunks that every worker can claim (see ``spread``)."""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition
from bulkops.engine.helper.pool import runs_in_helper
from bulkops.engine.persistence import apply_change
from bulkops.engine.resume import FileRows, StoredRows, operation_rows, source_fixes
from bulkops.engine.retry import RetrySource
from bulkops.engine.scope import Ending, ScopedRun, StopReason
from bulkops.engine.spread import SPREAD_SECONDS, Cut, Probe, chunk_size, grain, plan
from bulkops.engine.stored_file import stored_file
from bulkops.engine.undo import undo_source
from bulkops.errors import IllegalTransition
from bulkops.formats import FileFormat, RowCount, count_chunks
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import HELD_STATUSES, OperationChange
from bulkops.storage.records import ChunkRecord, OperationRecord
from bulkops.storage.states import ChunkState, OperationStatus, RowState

log = logging.getLogger("bulkops.engine")

# A file this large is likely split into chunks that a row helper may run: the helper
# starts while its rows are counted (half a second or so) rather than at the first chunk.
WARM_HELPERS_BYTES = 1_000_000
UNFINISHED = (RowState.PENDING, RowState.RUNNING, RowState.WAITING_FOR_COMPLETION)


class WholeOperation:
    """The scope of one worker's run of a whole operation, from claim to final status or
    release: it reads from the first row, and cuts the rest into chunks when that pays."""

    chunk: int | None = None  # it holds the operation itself
    waiting = False  # its rows wait for no other run's

    def __init__(self) -> None:
        self.chunks = 0  # how many chunks the operation was split into (0: not split)

    async def process(self, run: ScopedRun[Any]) -> None:
        """Run the operation's rows: an undo's, a retry's, or the file's (maybe cut)."""
        definition = run.definition()
        record, context = run.record, run.context
        stores, retry, config = context.stores, context.retry, context.config
        fmt = FileFormat(record.file_format)
        if record.undo_of is not None and record.status is OperationStatus.RUNNING:
            # An undo runs the rows the undone operation recorded: never split.
            await run.prepare(definition, record.total_rows)
            async with undo_source(stores, retry, record, definition) as source:
                await run.feed(source)
            return
        if record.status is OperationStatus.RETRYING:
            await self._process_retry(run, definition, fmt)
            return
        delimiter = definition.controls.csv_delimiter
        async with stored_file(stores.files, record.file_id, retry.timeout) as path:
            helpers = context.helpers
            if (
                helpers is not None
                and config.chunk_rows > 0
                and runs_in_helper(definition, config.max_row_concurrency, dry_run=record.dry_run)
                and path.stat().st_size >= WARM_HELPERS_BYTES
            ):
                helpers.warm()  # starts while the rows are counted
            sheet = record.sheet
            chunk_rows = config.chunk_rows
            # Where a chunk may begin: every grain of rows (one chunk when never split).
            step = grain(chunk_rows) if chunk_rows else 2**31
            limits = config.file_limits  # a bomb fails here, before any row runs
            counted = await asyncio.to_thread(
                partial(count_chunks, limits=limits), path, fmt, step, delimiter, sheet
            )
            await retry.call(stores.operations.set_total_rows, record.id, counted.total)
            await run.prepare(definition, counted.total)
            fixes = await retry.call(source_fixes, stores.operations, stores.rows, record)
            reader = operation_rows(
                path, definition, record.file_format, record.column_map, sheet=sheet, fixes=fixes
            )
            try:
                stored = await StoredRows.load(stores.rows, record.id)
                await self._run_and_spread(run, FileRows(reader, stored), counted)
            finally:
                reader.close()

    async def _run_and_spread(self, run: ScopedRun[Any], rows: FileRows, counted: RowCount) -> None:
        """Run the rows; when the file can be cut, run its first rows only (the first
        chunk), and split the rest into chunks sized at their pace when it would take this
        worker long, or is more than a chunk may hold."""
        if len(counted.chunks) < 2:
            await run.feed(rows)
            return
        chunk_rows = run.context.config.chunk_rows
        boundaries = {start.first_row for start in counted.chunks}
        probe = Probe(rows, boundaries, limit=chunk_rows, step=grain(chunk_rows))
        await run.feed(probe.first())
        probe.ended(run.turn_seconds)
        if run.stop_reason is not None or run.sink.halted or not probe.next_row:
            return
        left = counted.total - probe.next_row + 1
        if left <= chunk_rows and left * probe.seconds_per_row <= SPREAD_SECONDS:
            await run.feed(probe.rest())
            return
        run.pass_turn()
        await run.recorder.close()  # its rows are stored before the split
        size = chunk_size(probe.seconds_per_row, chunk_rows)
        first = Cut(1, probe.next_row - 1, counted.chunks[0].offset)
        rest = plan(counted.chunks, probe.next_row, counted.total, size, chunk_rows)
        await self._split(run, [first, *rest], counted.total)

    async def _split(self, run: ScopedRun[Any], cuts: list[Cut], total: int) -> None:
        """Hand the rest of the operation to its chunks: any worker may now claim them. The
        first cut is the rows this run ran: its chunk is stored Done, held by this worker."""
        record, context = run.record, run.context
        stores, retry = context.stores, context.retry
        now, me = utcnow(), context.config.worker_id
        ran, *rest = cuts
        parts = [
            ChunkRecord(
                record.id,
                0,
                ran.first_row,
                ran.row_count,
                ran.offset,
                state=ChunkState.DONE,
                worker_id=me,
                heartbeat_at=now,
            ),
            *(
                ChunkRecord(record.id, index, c.first_row, c.row_count, c.offset)
                for index, c in enumerate(rest, start=1)
            ),
        ]

        def split(current: OperationRecord) -> OperationChange | None:
            if current.worker_id != me or current.status is not OperationStatus.RUNNING:
                return None
            return lifecycle.split(current, total, len(parts), now)

        current = await retry.call(stores.operations.get, record.id)
        change = None if current is None else split(current)
        if change is None or await retry.call(stores.chunks.split, change, parts) is None:
            run.stop_reason = StopReason.LOST
            return
        self.chunks = len(rest)  # the chunks to claim
        await stores.wakeups.announce_work()  # other processes take chunks at once
        log.info(
            "Split %s into %d chunks of %d rows after its first %d",
            record.id,
            len(rest),
            rest[0].row_count,
            ran.row_count,
        )

    async def _process_retry(
        self, run: ScopedRun[Any], definition: OperationDefinition, fmt: FileFormat
    ) -> None:
        record = run.record
        await run.prepare(definition, record.total_rows)
        # The reset rows (and any a stopped worker left unfinished) run again.
        pending = run.context.stores.rows.iterate(record.id, states=UNFINISHED)
        source = RetrySource(
            pending,
            definition,
            drop_empty=fmt in (FileFormat.CSV, FileFormat.XLSX),
            column_map=record.column_map,
        )
        await run.feed(source)

    async def conclude(self, run: ScopedRun[Any], ending: Ending) -> None:
        """Finish, fail or release the operation, unless it was split, cancelled, taken
        over or left for storage: then its stored status stands."""
        record, context = run.record, run.context
        if self.chunks or ending.stop_reason in (
            StopReason.STORAGE,
            StopReason.CANCELLED,
            StopReason.LOST,
        ):
            if ending.stop_reason is not None:
                log.info("Left operation %s: %s", record.id, ending.stop_reason.value)
            return  # split, cancelled or taken over: the stored status stands
        now, me = utcnow(), context.config.worker_id
        counts = await context.retry.call(context.stores.operations.counts, record.id)

        def change(current: OperationRecord) -> OperationChange | None:
            if current.worker_id != me or current.status not in HELD_STATUSES:
                return None  # no longer ours
            if ending.stop_reason is StopReason.SHUTDOWN:
                return lifecycle.release(current, now)
            if ending.failure is not None:
                return lifecycle.fail(current, ending.failure, now, counts)
            return lifecycle.finish(current, counts, now)

        try:
            await apply_change(context.stores.operations, record.id, change, retry=context.retry)
        except IllegalTransition:
            log.info("Operation %s moved on meanwhile; its stored status stands", record.id)
