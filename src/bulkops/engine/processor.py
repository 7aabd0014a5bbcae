"""Processing one claimed operation from its stored file to a final status."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncIterable, Iterator
from dataclasses import dataclass
from itertools import islice

from bulkops.clock import utcnow
from bulkops.definition.conversion import convert
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.engine.events import finished, status_changed
from bulkops.engine.invoke import error_text, invoke
from bulkops.engine.lease import Lease
from bulkops.engine.pipeline import PipelineRunner
from bulkops.engine.recorder import RowRecorder
from bulkops.engine.resume import StoredRows
from bulkops.engine.retry import RetrySource
from bulkops.engine.rows import RowRunner
from bulkops.engine.signals import SignalHub
from bulkops.errors import FileFormatError, StorageError, ValidationError
from bulkops.formats import FileFormat, RawRow, count_rows, read_rows
from bulkops.storage.ports import EventStore, FileStore, OperationStore, RowStore
from bulkops.storage.records import OperationRecord, RowRecord
from bulkops.storage.states import OperationStatus, RowState

log = logging.getLogger("bulkops.engine")


Runner = RowRunner | PipelineRunner
# Rows travel in small batches: one await per batch instead of per row.
RowBatch = list[tuple[RawRow, RowRecord | None]]
RowBatches = AsyncIterable[RowBatch]
BATCH_SIZE = 128


class StopReason(enum.Enum):
    """Why a run stopped before its last row."""

    CANCELLED = "cancelled"  # a user cancelled the operation
    LOST = "lost"  # someone else moved it on (stuck sweeper, recovery)
    SHUTDOWN = "shutdown"  # this process is stopping and could not drain in time


class OperationFailed(Exception):
    """The operation as a whole cannot be processed (internal to the engine)."""


class _Stopped(Exception):
    """A flush found the operation no longer Running."""


@dataclass(frozen=True, slots=True)
class ProcessorConfig:
    """Tuning of row processing."""

    worker_id: str
    max_row_concurrency: int = 1
    flush_rows: int = 1000
    flush_interval: float = 0.5
    heartbeat_interval: float = 5.0
    signal_poll_interval: float = 2.0
    step_retry_delay: float = 1.0


@dataclass(frozen=True, slots=True)
class Stores:
    """The storage ports the engine works with."""

    operations: OperationStore
    rows: RowStore
    events: EventStore
    files: FileStore


class Processor:
    """Runs claimed operations. One instance serves every operation of a scheduler."""

    def __init__(
        self,
        registry: Registry,
        stores: Stores,
        config: ProcessorConfig,
        hub: SignalHub | None = None,
    ) -> None:
        self.registry = registry
        self.stores = stores
        self.config = config
        self.hub = hub or SignalHub()

    def start(self, record: OperationRecord, *, retry: bool = False) -> OperationRun:
        """A run for an operation this worker has just claimed (status Running); ``retry``
        when it was claimed from Retrying (only the rows a retry reset run)."""
        return OperationRun(self, record, retry=retry)


class OperationRun:
    """One worker's processing of one operation, from claim to final status or release."""

    def __init__(self, processor: Processor, record: OperationRecord, *, retry: bool) -> None:
        self._p = processor
        self._retry = retry
        self._stores = processor.stores
        self._config = processor.config
        self.record = record
        self.stop_reason: StopReason | None = None
        self._work: asyncio.Task[None] | None = None
        self._recorder = RowRecorder(
            record,
            self._stores.rows,
            self._stores.events,
            flush_rows=self._config.flush_rows,
            flush_interval=self._config.flush_interval,
        )

    def stop(self, reason: StopReason) -> None:
        """Interrupt processing; rows already finished are still recorded."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._work is not None and not self._work.done():
            self._work.cancel()

    def _lost(self, status: OperationStatus | None) -> None:
        self.stop(_reason_for(status))

    async def execute(self) -> None:
        """Process to the end and record the outcome."""
        lease = Lease(
            self._stores.operations,
            self.record.id,
            self._config.worker_id,
            check_interval=self._config.flush_interval,
            heartbeat_interval=self._config.heartbeat_interval,
            on_lost=self._lost,
        )
        watcher = asyncio.create_task(lease.run())
        self._work = asyncio.create_task(self._process())
        failure: str | None = None
        try:
            await self._work
        except (asyncio.CancelledError, _Stopped):
            if self.stop_reason is None:  # our own caller was cancelled
                self.stop_reason = StopReason.SHUTDOWN
        except (OperationFailed, FileFormatError) as exc:
            failure = str(exc)
        except StorageError:
            log.exception("Storage failed while processing %s; releasing it", self.record.id)
            self.stop_reason = StopReason.SHUTDOWN
        except Exception as exc:  # a defect must not leave the operation Running forever
            log.exception("Unexpected error while processing %s", self.record.id)
            failure = f"Internal error: {error_text(exc)}"
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await self._finish(failure)

    async def _finish(self, failure: str | None) -> None:
        await self._recorder.flush()
        operations, now = self._stores.operations, utcnow()
        if failure is not None:
            updated = await operations.transition(
                self.record.id, OperationStatus.FAILED, now, error_message=failure
            )
        elif self.stop_reason is StopReason.SHUTDOWN:
            updated = await operations.transition(self.record.id, OperationStatus.PENDING, now)
            if updated is not None:
                await self._stores.events.append(
                    [status_changed(updated, OperationStatus.RUNNING, now)]
                )
            return
        elif self.stop_reason is not None:
            return  # cancelled or taken over: the stored status stands
        else:
            # Counters come from the stored row states, so a row a signal failed in storage
            # while no worker held it is counted exactly once.
            current = await operations.recount(self.record.id)
            errors = current.error_count if current else 0
            target = OperationStatus.COMPLETED_WITH_ERRORS if errors else OperationStatus.COMPLETED
            updated = await operations.transition(self.record.id, target, now)
        if updated is not None:
            await self._stores.events.append([finished(updated, now)])

    async def _process(self) -> None:
        definition = self._p.registry.get(self.record.operation_name)
        if definition is None:
            raise OperationFailed(
                f"Operation {self.record.operation_name!r} is not registered in this worker"
            )
        fmt = FileFormat(self.record.file_format)
        if self._retry:
            await self._process_retry(definition, fmt)
            return
        async with self._stores.files.local_path(self.record.file_id) as path:
            total = await asyncio.to_thread(count_rows, path, fmt)
            await self._stores.operations.set_total_rows(self.record.id, total)
            runner = await self._prepare(definition, fmt)
            reader = read_rows(
                path,
                fmt,
                columns=definition.columns,
                required=definition.required_columns,
                keep_raw=definition.track_row_data,
                drop_empty=fmt is FileFormat.CSV,
            )
            try:
                rows = await self._pending_rows(reader)
                if self._config.max_row_concurrency <= 1:
                    await self._run_sequential(rows, runner)
                else:
                    await self._run_window(rows, runner)
            finally:
                reader.close()

    async def _process_retry(self, definition: OperationDefinition, fmt: FileFormat) -> None:
        runner = await self._prepare(definition, fmt)
        # The reset rows no longer count as processed; progress restarts from the others.
        await self._stores.operations.recount(self.record.id)
        pending = self._stores.rows.iterate(self.record.id, state=RowState.PENDING)
        source = RetrySource(pending, definition, drop_empty=fmt is FileFormat.CSV)
        if self._config.max_row_concurrency <= 1:
            await self._run_sequential(source, runner)
        else:
            await self._run_window(source, runner)

    async def _prepare(
        self, definition: OperationDefinition, fmt: FileFormat
    ) -> RowRunner | PipelineRunner:
        try:
            metadata = convert(definition.metadata_model, self.record.metadata)
        except ValidationError as exc:
            raise OperationFailed(f"Invalid metadata: {exc}") from None
        instance = definition.instantiate()
        if definition.overrides_validate_metadata:
            try:
                await invoke(instance.validate_metadata, metadata)
            except Exception as exc:
                raise OperationFailed(f"Metadata validation failed: {error_text(exc)}") from None
        if not definition.is_step_based:
            return RowRunner(definition, instance, metadata, self.record.id)
        return PipelineRunner(
            definition,
            instance,
            metadata,
            self.record.id,
            rows=self._stores.rows,
            hub=self._p.hub,
            signal_poll_interval=self._config.signal_poll_interval,
            retry_delay=self._config.step_retry_delay,
        )

    async def _pending_rows(self, reader: Iterator[RawRow]) -> _RowSource:
        stored = await StoredRows.load(self._stores.rows, self.record.id)
        return _RowSource(reader, stored)

    async def _flush_if_due(self) -> None:
        if self._recorder.due:
            status = await self._recorder.flush(wait=False)
            if status is not OperationStatus.RUNNING:
                self.stop_reason = self.stop_reason or _reason_for(status)
                raise _Stopped

    async def _run_sequential(self, rows: RowBatches, runner: Runner) -> None:
        recorder = self._recorder
        async for batch in rows:
            for raw, existing in batch:
                recorder.add(await runner.run(raw, existing))
                if recorder.due:
                    await self._flush_if_due()
            await asyncio.sleep(0)  # let HTTP requests and other operations in

    async def _run_window(self, rows: RowBatches, runner: Runner) -> None:
        limit = self._config.max_row_concurrency
        in_flight: set[asyncio.Task[RowRecord]] = set()
        # Finished tasks arrive here, so collecting one costs the same whether ten or a
        # thousand rows are in flight (asyncio.wait walks them all every time).
        finished: asyncio.Queue[asyncio.Task[RowRecord]] = asyncio.Queue()
        recorder = self._recorder

        async def collect() -> None:
            task = await finished.get()
            while True:
                in_flight.discard(task)
                recorder.add(task.result())
                if finished.empty():
                    break
                task = finished.get_nowait()
            await self._flush_if_due()

        try:
            async for batch in rows:
                for raw, existing in batch:
                    while len(in_flight) >= limit:
                        await collect()
                    task = asyncio.create_task(runner.run(raw, existing))
                    task.add_done_callback(finished.put_nowait)
                    in_flight.add(task)
            while in_flight:
                await collect()
        finally:
            for task in in_flight:
                task.cancel()
            for task in in_flight:
                with contextlib.suppress(asyncio.CancelledError):
                    recorder.add(await task)


def _reason_for(status: OperationStatus | None) -> StopReason:
    return StopReason.CANCELLED if status is OperationStatus.CANCELLED else StopReason.LOST


class _RowSource:
    """Raw rows still to run, in batches, each with its stored record when it has one: the
    file's rows minus those already final."""

    def __init__(self, reader: Iterator[RawRow], stored: StoredRows | None) -> None:
        self._reader = reader
        self._stored = stored

    def __aiter__(self) -> _RowSource:
        return self

    async def __anext__(self) -> RowBatch:
        if self._stored is None:  # a fresh run: every row runs
            batch: RowBatch = [(raw, None) for raw in islice(self._reader, BATCH_SIZE)]
        else:
            batch = []
            for raw in self._reader:
                existing = await self._stored.find(raw.number)
                if existing is None or not existing.state.is_final:
                    batch.append((raw, existing))
                    if len(batch) >= BATCH_SIZE:
                        break
        if not batch:
            raise StopAsyncIteration
        return batch
