"""Processing one claimed operation: its first rows, then the rest itself or split into
chunks that every worker can claim (see ``spread``)."""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition
from bulkops.engine.chunks import ChunkRun
from bulkops.engine.context import EngineContext, ProcessorConfig, Stores
from bulkops.engine.helper.pool import runs_in_helper
from bulkops.engine.instance import OperationFailed
from bulkops.engine.lease import Held
from bulkops.engine.persistence import apply_change
from bulkops.engine.resume import FileRows, StoredRows, operation_rows, source_fixes
from bulkops.engine.retry import RetrySource
from bulkops.engine.run import Ending, Run, Runner, StopReason
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

__all__ = [
    "EngineContext",
    "OperationFailed",
    "OperationRun",
    "Processor",
    "ProcessorConfig",
    "StopReason",
    "Stores",
]


class Processor(EngineContext):
    """Starts the runs of claimed operations and chunks: the engine's context plus the two
    kinds of run. One instance serves every run of a scheduler."""

    def start(self, record: OperationRecord) -> OperationRun:
        """A run for an operation this worker has just claimed or taken over: Running
        processes the file (skipping rows already final) or splits it into chunks, Retrying
        the rows a retry reset."""
        return OperationRun(self, record)

    def start_chunk(
        self, record: OperationRecord, chunk: ChunkRecord, before: ChunkRun | None = None
    ) -> ChunkRun:
        """A run for a chunk this worker has just claimed; its rows run once those of
        ``before`` (the run of the operation's chunk before it here), when given, are done."""
        from bulkops.engine.chunks import ChunkRun

        return ChunkRun(self, record, chunk, before)


class OperationRun(Run):
    """One worker's processing of one operation, from claim to final status or release."""

    def __init__(self, processor: Processor, record: OperationRecord) -> None:
        super().__init__(processor, record, Held(record.id, processor.config.worker_id))
        self.chunks = 0  # how many chunks the operation was split into (0: not split)

    async def _process(self) -> None:
        definition = self._definition()
        fmt = FileFormat(self.record.file_format)
        if self.record.undo_of is not None and self.record.status is OperationStatus.RUNNING:
            # An undo runs the rows the undone operation recorded: never split.
            runner = await self._prepare(definition, self.record.total_rows)
            stores, record = self._stores, self.record
            async with undo_source(stores, self._retry, record, definition) as source:
                await self._run(source, runner)
            return
        if self.record.status is OperationStatus.RETRYING:
            await self._process_retry(definition, fmt)
            return
        delimiter = definition.controls.csv_delimiter
        files, timeout = self._stores.files, self._retry.timeout
        async with stored_file(files, self.record.file_id, timeout) as path:
            helpers = self._context.helpers
            if (
                helpers is not None
                and self._config.chunk_rows > 0
                and runs_in_helper(
                    definition, self._config.max_row_concurrency, dry_run=self.record.dry_run
                )
                and path.stat().st_size >= WARM_HELPERS_BYTES
            ):
                helpers.warm()  # starts while the rows are counted
            sheet = self.record.sheet
            chunk_rows = self._config.chunk_rows
            # Where a chunk may begin: every grain of rows (one chunk when never split).
            step = grain(chunk_rows) if chunk_rows else 2**31
            limits = self._config.file_limits  # a bomb fails here, before any row runs
            counted = await asyncio.to_thread(
                partial(count_chunks, limits=limits), path, fmt, step, delimiter, sheet
            )
            await self._retry.call(
                self._stores.operations.set_total_rows, self.record.id, counted.total
            )
            runner = await self._prepare(definition, counted.total)
            stores, record = self._stores, self.record
            fixes = await self._retry.call(source_fixes, stores.operations, stores.rows, record)
            reader = operation_rows(
                path,
                definition,
                self.record.file_format,
                self.record.column_map,
                sheet=sheet,
                fixes=fixes,
            )
            try:
                stored = await StoredRows.load(self._stores.rows, self.record.id)
                await self._run_and_spread(FileRows(reader, stored), runner, counted)
            finally:
                reader.close()

    async def _run_and_spread(self, rows: FileRows, runner: Runner, counted: RowCount) -> None:
        """Run the rows; when the file can be cut, run its first rows only (the first
        chunk), and split the rest into chunks sized at their pace when it would take this
        worker long, or is more than a chunk may hold."""
        if len(counted.chunks) < 2:
            await self._run(rows, runner)
            return
        chunk_rows = self._config.chunk_rows
        boundaries = {start.first_row for start in counted.chunks}
        probe = Probe(rows, boundaries, limit=chunk_rows, step=grain(chunk_rows))
        await self._run(probe.first(), runner)
        probe.ended()
        if self.stop_reason is not None or self._sink.halted or not probe.next_row:
            return
        left = counted.total - probe.next_row + 1
        if left <= chunk_rows and left * probe.seconds_per_row <= SPREAD_SECONDS:
            await self._run(probe.rest(), runner)
            return
        if self._turn is not None:
            self._turn.release()
        await self._recorder.close()  # its rows are stored before the split
        size = chunk_size(probe.seconds_per_row, chunk_rows)
        first = Cut(1, probe.next_row - 1, counted.chunks[0].offset)
        rest = plan(counted.chunks, probe.next_row, counted.total, size, chunk_rows)
        await self._split([first, *rest], counted.total)

    async def _split(self, cuts: list[Cut], total: int) -> None:
        """Hand the rest of the operation to its chunks: any worker may now claim them. The
        first cut is the rows this run ran: its chunk is stored Done, held by this worker."""
        now, me = utcnow(), self._config.worker_id
        ran, *rest = cuts
        parts = [
            ChunkRecord(
                self.record.id,
                0,
                ran.first_row,
                ran.row_count,
                ran.offset,
                state=ChunkState.DONE,
                worker_id=me,
                heartbeat_at=now,
            ),
            *(
                ChunkRecord(self.record.id, index, c.first_row, c.row_count, c.offset)
                for index, c in enumerate(rest, start=1)
            ),
        ]

        def split(current: OperationRecord) -> OperationChange | None:
            if current.worker_id != me or current.status is not OperationStatus.RUNNING:
                return None
            return lifecycle.split(current, total, len(parts), now)

        current = await self._retry.call(self._stores.operations.get, self.record.id)
        change = None if current is None else split(current)
        if (
            change is None
            or await self._retry.call(self._stores.chunks.split, change, parts) is None
        ):
            self.stop_reason = StopReason.LOST
            return
        self.chunks = len(rest)  # the chunks to claim
        await self._stores.wakeups.announce_work()  # other processes take chunks at once
        log.info(
            "Split %s into %d chunks of %d rows after its first %d",
            self.record.id,
            len(rest),
            rest[0].row_count,
            ran.row_count,
        )

    async def _process_retry(self, definition: OperationDefinition, fmt: FileFormat) -> None:
        runner = await self._prepare(definition, self.record.total_rows)
        # The reset rows (and any a stopped worker left unfinished) run again.
        pending = self._stores.rows.iterate(self.record.id, states=UNFINISHED)
        source = RetrySource(
            pending,
            definition,
            drop_empty=fmt in (FileFormat.CSV, FileFormat.XLSX),
            column_map=self.record.column_map,
        )
        await self._run(source, runner)

    async def _conclude(self, ending: Ending) -> None:
        if self.chunks or ending.stop_reason in (
            StopReason.STORAGE,
            StopReason.CANCELLED,
            StopReason.LOST,
        ):
            if ending.stop_reason is not None:
                log.info("Left operation %s: %s", self.record.id, ending.stop_reason.value)
            return  # split, cancelled or taken over: the stored status stands
        now, me = utcnow(), self._config.worker_id
        counts = await self._retry.call(self._stores.operations.counts, self.record.id)

        def change(current: OperationRecord) -> OperationChange | None:
            if current.worker_id != me or current.status not in HELD_STATUSES:
                return None  # no longer ours
            if ending.stop_reason is StopReason.SHUTDOWN:
                return lifecycle.release(current, now)
            if ending.failure is not None:
                return lifecycle.fail(current, ending.failure, now, counts)
            return lifecycle.finish(current, counts, now)

        try:
            await apply_change(self._stores.operations, self.record.id, change, retry=self._retry)
        except IllegalTransition:
            log.info("Operation %s moved on meanwhile; its stored status stands", self.record.id)
