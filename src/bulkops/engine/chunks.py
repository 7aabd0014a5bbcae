"""Processing one chunk of an operation: a range of rows, read from its offset."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from itertools import chain, dropwhile, islice
from pathlib import Path
from typing import Any

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.helper.messages import HelperLost, Job, Progress
from bulkops.engine.helper.pool import RowHelper, runs_in_helper
from bulkops.engine.instance import OperationFailed
from bulkops.engine.resume import FileRows, StoredRows, read_chunk, source_fixes
from bulkops.engine.scope import Ending, ScopedRun, StopReason
from bulkops.engine.sink import RecordingSink
from bulkops.engine.splits import end_split
from bulkops.engine.spread import fast
from bulkops.engine.stored_file import stored_file
from bulkops.formats import RawRow
from bulkops.storage.records import ChunkRecord

log = logging.getLogger("bulkops.engine")


class ChunkRange:
    """The scope of one worker's run of one chunk: its range of rows, read from its offset
    (or run in a row helper). The worker that ends the last chunk ends the operation."""

    def __init__(self, chunk: ChunkRecord, before: ScopedRun[ChunkRange] | None = None) -> None:
        self.record = chunk
        self._before = before  # the run whose rows must be done before these run
        # Time to claim the next chunk: the second half of the rows is being read here, or
        # the rows run in a helper.
        self.nearly_done = asyncio.Event()
        self.rows_done = asyncio.Event()  # every row ran; the last write may be in flight
        self.helper: RowHelper | None = None  # the helper running its rows right now
        self._reported = chunk.first_row - 1  # rows up to this one ran in a helper

    @property
    def chunk(self) -> int:
        """The index of the chunk it holds."""
        return self.record.index

    @property
    def waiting(self) -> bool:
        """Claimed ahead, its rows not started: the chunk before still runs rows."""
        return self._before is not None and not self._before.scope.rows_done.is_set()

    async def process(self, run: ScopedRun[Any]) -> None:
        """Run the chunk's rows once the chunk before's are done: in a row helper when they
        may run in one, else here (from where a lost helper stopped)."""
        definition = run.definition()
        chunk, record, context = self.record, run.record, run.context
        stores, retry = context.stores, context.retry
        take = partial(self._take, run.sink)
        async with stored_file(stores.files, record.file_id, retry.timeout) as path:
            await run.prepare(definition, record.total_rows)
            stored = await StoredRows.load(stores.rows, record.id, after=chunk.first_row - 1)
            fixes = await self._fixes(run)
            job = self._job(run, definition, path, fixes)
            sent = await self._send_ahead(run, definition, stored, job)
            if self._before is not None:
                try:
                    await self._before.scope.rows_done.wait()
                    await self._still_running(run)
                except BaseException:
                    if sent is not None:
                        helper, job = sent
                        try:
                            await helper.abandon(job, take)
                        finally:  # the helper goes back to its pool whatever the drain met
                            helper.release()
                    raise
            done = chunk.first_row - 1  # rows up to this one ran elsewhere
            if sent is None and (free := self._helper_for(run, definition, stored)) is not None:
                sent = await self._submit(free, job)
            if sent is not None:
                ran = await self._offload(run, *sent)
                if ran is None:
                    self.rows_done.set()
                    return
                done = ran
            rows = read_chunk(
                path, definition, chunk, record.file_format, record.column_map, record.sheet, fixes
            )
            try:
                remaining = dropwhile(lambda raw: raw.number <= done, rows)
                await run.feed(FileRows(self._in_range(remaining, done + 1), stored))
                self.rows_done.set()
            finally:
                rows.close()

    def _may_use_helper(
        self, run: ScopedRun[Any], definition: OperationDefinition, stored: StoredRows | None
    ) -> bool:
        """Whether the chunk's rows may run in a helper process (none of them stored yet):
        only when it was cut for fast rows (``spread.fast``). A smaller chunk was cut
        at the pace of slow rows, which run here in the process's fair share."""
        config = run.context.config
        concurrency, dry_run = config.max_row_concurrency, run.record.dry_run
        return (
            runs_in_helper(definition, concurrency, dry_run=dry_run)
            and fast(self.record.row_count, config.chunk_rows)
            and (stored is None or stored.next_number > self.record.last_row)
        )

    def _helper_for(
        self, run: ScopedRun[Any], definition: OperationDefinition, stored: StoredRows | None
    ) -> RowHelper | None:
        """A row helper process for the chunk's rows, when they may run in one (see
        ``RowHelpers.take``)."""
        helpers = run.context.helpers
        if helpers is None or not self._may_use_helper(run, definition, stored):
            return None
        return helpers.take()

    async def _send_ahead(
        self,
        run: ScopedRun[Any],
        definition: OperationDefinition,
        stored: StoredRows | None,
        job: Job,
    ) -> tuple[RowHelper, Job] | None:
        """Queue the rows in the helper running the chunk before's, when they may run in
        one: it goes on with them the moment it is done with those, instead of waiting for
        this run to learn of it and hand them over. A stop of the chunk before stops them
        there too."""
        before = self._before
        if before is None or before.scope.rows_done.is_set() or before.stop_reason is not None:
            return None
        helper = before.scope.helper
        if helper is None or not self._may_use_helper(run, definition, stored):
            return None
        return await self._submit(helper, replace(job, ahead=True))

    async def _submit(self, helper: RowHelper, job: Job) -> tuple[RowHelper, Job] | None:
        try:
            return helper, await helper.submit(job)
        except HelperLost:
            helper.release()
            return None

    async def _fixes(self, run: ScopedRun[Any]) -> dict[int, dict[str, Any]] | None:
        """The fixed rows' data of the chunk's rows (see ``resume.source_fixes``)."""
        stores, chunk = run.context.stores, self.record
        fixes = await run.context.retry.call(
            source_fixes, stores.operations, stores.rows, run.record
        )
        if not fixes:
            return None
        first, last = chunk.first_row, chunk.last_row
        return {number: data for number, data in fixes.items() if first <= number <= last}

    def _job(
        self,
        run: ScopedRun[Any],
        definition: OperationDefinition,
        path: Path,
        fixes: dict[int, dict[str, Any]] | None,
    ) -> Job:
        record = run.record
        return Job(
            operation_id=record.id,
            operation=definition.name,
            metadata=dict(record.metadata),
            path=str(path),
            file_format=record.file_format,
            column_map=dict(record.column_map) if record.column_map else None,
            chunk=self.record,
            report_interval=run.context.config.flush_interval,
            created_by=record.created_by,
            sheet=record.sheet,
            dry_run=record.dry_run,
            fixes=fixes or None,
        )

    def _take(self, sink: RecordingSink, progress: Progress) -> None:
        """Record what a helper reported of the rows: its outcomes go to the run's sink."""
        for first, last, at in progress.spans:
            sink.completed(first, last, at)
        for record in progress.failed:
            sink.record(record)
        sink.timed(progress.latencies, progress.seconds)
        self._reported = progress.upto

    async def _offload(self, run: ScopedRun[Any], helper: RowHelper, job: Job) -> int | None:
        """Follow the submitted job of the chunk's rows in ``helper``, recording them as they
        are reported. None when it ran them all; else the last row it reported, after
        which the rows run here: when the helper was lost (one may have run there
        unreported, as in a crash), or the job was dropped behind a stopped one."""
        recorder = run.recorder

        async def room() -> None:
            if recorder.full:
                await recorder.wait_room()

        self.helper = helper
        # The next chunk is claimed at once: setting it up (claim, stored rows) took longer
        # than half of this one's rows in a helper, too late to queue its job behind them.
        self.nearly_done.set()
        try:
            finished = await helper.follow(job, partial(self._take, run.sink), room)
        except HelperLost as exc:
            log.warning(
                "Row helper lost (%s) at row %d of chunk %d of operation %s; running the rest here",
                exc,
                self._reported,
                self.record.index,
                run.record.id,
            )
            return self._reported
        finally:
            self.helper = None  # before the release: no job is queued behind this one now
            helper.release()
        if finished.failure is not None:
            raise OperationFailed(finished.failure)
        return self._reported if finished.stopped else None

    async def _still_running(self, run: ScopedRun[Any]) -> None:
        """Stop here, before a row, when the operation was cancelled (or moved on) while
        this chunk waited for the one before: the heartbeat would see it only later."""
        context = run.context
        current = await context.retry.call(context.stores.operations.get, run.record.id)
        run.lost(None if current is None else current.status)
        if run.stop_reason is not None:
            await asyncio.sleep(0)  # the stop cancels this task at its next suspension

    def _in_range(self, rows: Iterator[RawRow], first: int) -> Iterator[RawRow]:
        """The chunk's rows from row ``first`` on; ``nearly_done`` is set when the second
        half of the chunk begins."""
        half = self.record.first_row + self.record.row_count // 2
        return chain(islice(rows, max(0, half - first)), self._nearly_done(), rows)

    def _nearly_done(self) -> Iterator[RawRow]:
        self.nearly_done.set()
        yield from ()

    async def conclude(self, run: ScopedRun[Any], ending: Ending) -> None:
        """End the chunk: Done (and the operation, when it was the last), handed back on a
        stop or lost storage, the operation failed on a failure; left as it is when the
        operation was cancelled or taken over."""
        context = run.context
        chunks, me = context.stores.chunks, context.config.worker_id
        operation_id, index = run.record.id, self.record.index
        if ending.failure is not None:
            await end_split(context, operation_id, ending.failure)
            return
        if ending.stop_reason in (StopReason.SHUTDOWN, StopReason.STORAGE):
            # Handed back: another may take it (once storage answers again). Left held, a
            # chunk would wait until its live holder was judged unresponsive.
            await context.retry.call(chunks.end_chunk, operation_id, index, me, done=False)
            await context.stores.wakeups.announce_work()
            return
        if ending.stop_reason is not None:  # cancelled, taken over, or storage gone
            log.info(
                "Left chunk %d of operation %s: %s",
                index,
                operation_id,
                ending.stop_reason.value,
            )
            return  # the chunk stays as it is
        left = await context.retry.call(chunks.end_chunk, operation_id, index, me, done=True)
        if left == 0:
            await end_split(context, operation_id, None)
