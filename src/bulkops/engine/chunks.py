"""Processing one chunk of an operation: a range of rows, read from its offset."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import replace
from itertools import chain, dropwhile, islice
from pathlib import Path
from typing import Any
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition
from bulkops.engine.context import EngineContext
from bulkops.engine.helper.messages import Job, Progress
from bulkops.engine.helper.pool import HelperLost, RowHelper, runs_in_helper
from bulkops.engine.instance import OperationFailed
from bulkops.engine.lease import Held
from bulkops.engine.persistence import apply_change
from bulkops.engine.resume import FileRows, StoredRows, read_chunk, source_fixes
from bulkops.engine.run import Ending, Run, StopReason
from bulkops.engine.spread import fast
from bulkops.engine.stored_file import stored_file
from bulkops.errors import IllegalTransition
from bulkops.formats import RawRow
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.records import ChunkRecord, OperationRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")


class ChunkRun(Run):
    """One worker's processing of one chunk. The worker that ends the last chunk ends the
    operation."""

    def __init__(
        self,
        context: EngineContext,
        record: OperationRecord,
        chunk: ChunkRecord,
        before: ChunkRun | None = None,
    ):
        held = Held(record.id, context.config.worker_id, chunk.index)
        super().__init__(context, record, held)
        self.chunk = chunk
        self._before = before  # the run whose rows must be done before these run
        # Time to claim the next chunk: the second half of the rows is being read here, or
        # the rows run in a helper.
        self.nearly_done = asyncio.Event()
        self.rows_done = asyncio.Event()  # every row ran; the last write may be in flight
        self.helper: RowHelper | None = None  # the helper running its rows right now
        self._reported = chunk.first_row - 1  # rows up to this one ran in a helper

    @property
    def waiting(self) -> bool:
        """Claimed ahead, its rows not started: the chunk before still runs rows."""
        return self._before is not None and not self._before.rows_done.is_set()

    async def _process(self) -> None:
        definition = self._definition()
        chunk = self.chunk
        files, timeout = self._stores.files, self._retry.timeout
        async with stored_file(files, self.record.file_id, timeout) as path:
            runner = await self._prepare(definition, self.record.total_rows)
            stored = await StoredRows.load(
                self._stores.rows, self.record.id, after=chunk.first_row - 1
            )
            fixes = await self._fixes()
            job = self._job(definition, path, fixes)
            sent = await self._send_ahead(definition, stored, job)
            if self._before is not None:
                try:
                    await self._before.rows_done.wait()
                    await self._still_running()
                except BaseException:
                    if sent is not None:
                        helper, job = sent
                        try:
                            await helper.abandon(job, self._take)
                        finally:  # the helper goes back to its pool whatever the drain met
                            helper.release()
                    raise
            done = chunk.first_row - 1  # rows up to this one ran elsewhere
            if sent is None and (free := self._helper_for(definition, stored)) is not None:
                sent = await self._submit(free, job)
            if sent is not None:
                ran = await self._offload(*sent)
                if ran is None:
                    self.rows_done.set()
                    return
                done = ran
            rows = read_chunk(
                path,
                definition,
                chunk,
                self.record.file_format,
                self.record.column_map,
                self.record.sheet,
                fixes,
            )
            try:
                remaining = dropwhile(lambda raw: raw.number <= done, rows)
                await self._run(FileRows(self._in_range(remaining, done + 1), stored), runner)
                self.rows_done.set()
            finally:
                rows.close()

    def _may_use_helper(self, definition: OperationDefinition, stored: StoredRows | None) -> bool:
        """Whether the chunk's rows may run in a helper process (none of them stored yet):
        only when it was cut for fast rows (``spread.fast``). A smaller chunk was cut
        at the pace of slow rows, which run here in the process's fair share."""
        concurrency, dry_run = self._config.max_row_concurrency, self.record.dry_run
        return (
            runs_in_helper(definition, concurrency, dry_run=dry_run)
            and fast(self.chunk.row_count, self._config.chunk_rows)
            and (stored is None or stored.next_number > self.chunk.last_row)
        )

    def _helper_for(
        self, definition: OperationDefinition, stored: StoredRows | None
    ) -> RowHelper | None:
        """A row helper process for the chunk's rows, when they may run in one (see
        ``RowHelpers.take``)."""
        helpers = self._context.helpers
        if helpers is None or not self._may_use_helper(definition, stored):
            return None
        return helpers.take()

    async def _send_ahead(
        self, definition: OperationDefinition, stored: StoredRows | None, job: Job
    ) -> tuple[RowHelper, Job] | None:
        """Queue the rows in the helper running the chunk before's, when they may run in
        one: it goes on with them the moment it is done with those, instead of waiting for
        this run to learn of it and hand them over. A stop of the chunk before stops them
        there too."""
        before = self._before
        if before is None or before.rows_done.is_set() or before.stop_reason is not None:
            return None
        helper = before.helper
        if helper is None or not self._may_use_helper(definition, stored):
            return None
        return await self._submit(helper, replace(job, ahead=True))

    async def _submit(self, helper: RowHelper, job: Job) -> tuple[RowHelper, Job] | None:
        try:
            return helper, await helper.submit(job)
        except HelperLost:
            helper.release()
            return None

    async def _fixes(self) -> dict[int, dict[str, Any]] | None:
        """The fixed rows' data of the chunk's rows (see ``resume.source_fixes``)."""
        stores, chunk = self._stores, self.chunk
        fixes = await self._retry.call(source_fixes, stores.operations, stores.rows, self.record)
        if not fixes:
            return None
        first, last = chunk.first_row, chunk.last_row
        return {number: data for number, data in fixes.items() if first <= number <= last}

    def _job(
        self, definition: OperationDefinition, path: Path, fixes: dict[int, dict[str, Any]] | None
    ) -> Job:
        return Job(
            operation_id=self.record.id,
            operation=definition.name,
            metadata=dict(self.record.metadata),
            path=str(path),
            file_format=self.record.file_format,
            column_map=dict(self.record.column_map) if self.record.column_map else None,
            chunk=self.chunk,
            report_interval=self._config.flush_interval,
            created_by=self.record.created_by,
            sheet=self.record.sheet,
            dry_run=self.record.dry_run,
            fixes=fixes or None,
        )

    def _take(self, progress: Progress) -> None:
        """Record what a helper reported of the rows: its outcomes go to the run's sink."""
        sink = self._sink
        for first, last, at in progress.spans:
            sink.completed(first, last, at)
        for record in progress.failed:
            sink.record(record)
        sink.timed(progress.latencies, progress.seconds)
        self._reported = progress.upto

    async def _offload(self, helper: RowHelper, job: Job) -> int | None:
        """Follow the submitted job of the chunk's rows in ``helper``, recording them as they
        are reported. None when it ran them all; else the last row it reported, after
        which the rows run here: when the helper was lost (one may have run there
        unreported, as in a crash), or the job was dropped behind a stopped one."""
        recorder = self._recorder

        async def room() -> None:
            if recorder.full:
                await recorder.wait_room()

        self.helper = helper
        # The next chunk is claimed at once: setting it up (claim, stored rows) took longer
        # than half of this one's rows in a helper, too late to queue its job behind them.
        self.nearly_done.set()
        try:
            finished = await helper.follow(job, self._take, room)
        except HelperLost as exc:
            log.warning(
                "Row helper lost (%s) at row %d of chunk %d of operation %s; running the rest here",
                exc,
                self._reported,
                self.chunk.index,
                self.record.id,
            )
            return self._reported
        finally:
            self.helper = None  # before the release: no job is queued behind this one now
            helper.release()
        if finished.failure is not None:
            raise OperationFailed(finished.failure)
        return self._reported if finished.stopped else None

    async def _still_running(self) -> None:
        """Stop here, before a row, when the operation was cancelled (or moved on) while
        this chunk waited for the one before: the lease would see it only later."""
        current = await self._retry.call(self._stores.operations.get, self.record.id)
        self._stored_status(None if current is None else current.status)
        if self.stop_reason is not None:
            await asyncio.sleep(0)  # the stop cancels this task at its next suspension

    def _in_range(self, rows: Iterator[RawRow], first: int) -> Iterator[RawRow]:
        """The chunk's rows from row ``first`` on; ``nearly_done`` is set when the second
        half of the chunk begins."""
        half = self.chunk.first_row + self.chunk.row_count // 2
        return chain(islice(rows, max(0, half - first)), self._nearly_done(), rows)

    def _nearly_done(self) -> Iterator[RawRow]:
        self.nearly_done.set()
        yield from ()

    async def _conclude(self, ending: Ending) -> None:
        chunks, me = self._stores.chunks, self._config.worker_id
        operation_id, index = self.record.id, self.chunk.index
        if ending.failure is not None:
            await self._end_operation(ending.failure)
            return
        if ending.stop_reason in (StopReason.SHUTDOWN, StopReason.STORAGE):
            # Handed back: another may take it (once storage answers again). Left held, a
            # chunk would wait until its live holder was judged unresponsive.
            await self._retry.call(chunks.end_chunk, operation_id, index, me, done=False)
            await self._stores.wakeups.announce_work()
            return
        if ending.stop_reason is not None:  # cancelled, taken over, or storage gone
            log.info(
                "Left chunk %d of operation %s: %s",
                index,
                operation_id,
                ending.stop_reason.value,
            )
            return  # the chunk stays as it is
        left = await self._retry.call(chunks.end_chunk, operation_id, index, me, done=True)
        if left == 0:
            await self._end_operation(None)

    async def _end_operation(self, failure: str | None) -> None:
        """Finish (or fail) the operation, while it is still Running."""
        await end_split(self._context, self.record.id, failure)


async def end_split(context: EngineContext, operation_id: UUID, failure: str | None) -> None:
    """Finish a split operation from its stored rows (or fail it with ``failure``)."""
    stores, retry = context.stores, context.retry
    counts = await retry.call(stores.operations.counts, operation_id)
    now = utcnow()

    def end(current: OperationRecord) -> OperationChange | None:
        if current.status is not OperationStatus.RUNNING:
            return None
        if failure is not None:
            return lifecycle.fail(current, failure, now, counts)
        return lifecycle.finish(current, counts, now)

    try:
        await apply_change(stores.operations, operation_id, end, retry=retry)
    except IllegalTransition:
        log.info("Operation %s moved on meanwhile; its stored status stands", operation_id)
