"""Processing one chunk of a split operation: a range of rows, read from its offset."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from itertools import chain, dropwhile, islice
from typing import TYPE_CHECKING
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.engine.lease import Held
from bulkops.engine.persistence import apply_change
from bulkops.engine.resume import FileRows, StoredRows
from bulkops.engine.run import Ending, Run, StopReason
from bulkops.errors import IllegalTransition
from bulkops.formats import ChunkStart, FileFormat, RawRow, read_rows
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.records import ChunkRecord, OperationRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")

if TYPE_CHECKING:
    from bulkops.engine.processor import Processor


class ChunkRun(Run):
    """One worker's processing of one chunk. The worker that ends the last chunk ends the
    operation."""

    def __init__(
        self,
        processor: Processor,
        record: OperationRecord,
        chunk: ChunkRecord,
        after: asyncio.Event | None = None,
    ):
        held = Held(record.id, processor.config.worker_id, chunk.index)
        super().__init__(processor, record, held)
        self.chunk = chunk
        self._after = after  # set when the rows of the chunk before may no longer run
        self.nearly_done = asyncio.Event()  # the second half of the rows is being read
        self.rows_done = asyncio.Event()  # every row ran; the last write may be in flight

    @property
    def waiting(self) -> bool:
        """Claimed ahead, its rows not started: the chunk before still runs rows."""
        return self._after is not None and not self._after.is_set()

    async def _process(self) -> None:
        definition = self._definition()
        fmt = FileFormat(self.record.file_format)
        chunk = self.chunk
        async with self._stores.files.local_path(self.record.file_id) as path:
            runner = await self._prepare(definition, self.record.total_rows)
            start = ChunkStart(chunk.first_row, chunk.offset) if chunk.offset >= 0 else None
            reader = read_rows(
                path,
                fmt,
                columns=definition.columns,
                required=definition.required_columns,
                keep_raw=definition.track_row_data,
                drop_empty=fmt is FileFormat.CSV,
                column_map=self.record.column_map,
                delimiter=definition.controls.csv_delimiter,
                start=start,
                limit=chunk.row_count if start is not None else None,
            )
            try:
                stored = await StoredRows.load(
                    self._stores.rows, self.record.id, after=chunk.first_row - 1
                )
                if self._after is not None:
                    await self._after.wait()
                    await self._still_running()
                await self._run(FileRows(self._in_range(reader), stored), runner)
                self.rows_done.set()
            finally:
                reader.close()

    async def _still_running(self) -> None:
        """Stop here, before a row, when the operation was cancelled (or moved on) while
        this chunk waited for the one before: the lease would see it only later."""
        current = await self._retry.call(self._stores.operations.get, self.record.id)
        self._stored_status(None if current is None else current.status)
        if self.stop_reason is not None:
            await asyncio.sleep(0)  # the stop cancels this task at its next suspension

    def _in_range(self, reader: Iterator[RawRow]) -> Iterator[RawRow]:
        """The chunk's rows (a reader without an offset starts at the file's first row);
        ``nearly_done`` is set when the second half of them begins."""
        first, count = self.chunk.first_row, self.chunk.row_count
        rows = dropwhile(lambda raw: raw.number < first, reader)
        half = count // 2
        return chain(islice(rows, count - half), self._nearly_done(), islice(rows, half))

    def _nearly_done(self) -> Iterator[RawRow]:
        self.nearly_done.set()
        yield from ()

    async def _conclude(self, ending: Ending) -> None:
        chunks, me = self._stores.chunks, self._config.worker_id
        operation_id, index = self.record.id, self.chunk.index
        if ending.failure is not None:
            await self._end_operation(ending.failure)
            return
        if ending.stop_reason is StopReason.SHUTDOWN:
            await self._retry.call(chunks.end_chunk, operation_id, index, me, done=False)
            await self._stores.wakeups.announce_work()  # handed back: another may take it
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
        await end_split(self._p, self.record.id, failure)


async def end_split(processor: Processor, operation_id: UUID, failure: str | None) -> None:
    """Finish a split operation from its stored rows (or fail it with ``failure``)."""
    stores, retry = processor.stores, processor.retry
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
