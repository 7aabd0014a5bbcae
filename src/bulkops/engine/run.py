"""What every run shares: from rows to records, stopping, and the end of a run.

A run is one worker's processing of an operation (``processor.OperationRun``) or of one
chunk of it (``chunks.ChunkRun``). Subclasses say what to read and how a run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncIterable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from bulkops.definition.models import Metadata
from bulkops.definition.operation import OperationBase, OperationDefinition
from bulkops.engine.batches import BatchRunner
from bulkops.engine.context import EngineContext
from bulkops.engine.dry_run import DRY_RUN_STEP, DRY_RUN_STEP_INDEX, DryRunner
from bulkops.engine.fair_share import Claimant, SharedSlots, Turn, TurnSlots, tenant_of
from bulkops.engine.instance import OperationFailed, instantiate
from bulkops.engine.invoke import error_text
from bulkops.engine.lease import Held, Lease
from bulkops.engine.loops import PlainRunner, run_batches, run_plain
from bulkops.engine.pacing import Pacer, Slots
from bulkops.engine.pipeline import PipelineRunner
from bulkops.engine.recorder import RowRecorder
from bulkops.engine.resume import RowBatch
from bulkops.engine.rows import RowRunner
from bulkops.engine.sink import RecordingSink
from bulkops.engine.undo import UndoRunner
from bulkops.engine.window import FailureBudget, Window
from bulkops.errors import FileFormatError, StorageError
from bulkops.formats import RawRow
from bulkops.observability.logs import operation_scope
from bulkops.observability.tracing import span
from bulkops.storage.lanes import enter_processing_lane
from bulkops.storage.lifecycle import HELD_STATUSES
from bulkops.storage.records import Fence, OperationRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")

Runner = RowRunner | PipelineRunner | BatchRunner | DryRunner
# Rows run this long between two yields to the event loop: each yield puts the run behind
# every HTTP request that is ready, so yielding after every batch let busy readers starve
# processing; a few milliseconds keeps requests quick and the rows going.
SLICE_SECONDS = 0.005
# Rows travel in small batches (resume.BATCH_SIZE): one await per batch, not per row.
RowBatches = AsyncIterable[RowBatch]


class StopReason(enum.Enum):
    """Why a run stopped before its last row."""

    CANCELLED = "cancelled"  # a user cancelled the operation
    LOST = "lost"  # someone else moved it on (stuck sweeper, recovery, a resuming worker)
    SHUTDOWN = "shutdown"  # this process is stopping and could not drain in time
    STORAGE = "storage"  # storage stayed unreachable: left to be resumed


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended: why it stopped early (None: it read every row) and the failure of
    the operation as a whole, if any."""

    stop_reason: StopReason | None
    failure: str | None


class Run:
    """Processes rows of one operation for one worker and records them."""

    def __init__(self, context: EngineContext, record: OperationRecord, held: Held) -> None:
        self._context = context
        self._stores = context.stores
        self._config = context.config
        self._retry = context.retry
        self.record = record
        self._held = held
        self.stop_reason: StopReason | None = None
        self._work: asyncio.Task[None] | None = None
        limit = self._config.max_row_concurrency
        self._slots = Slots(limit) if limit > 1 else None
        self._claimant: Claimant | None = None  # its place in the process's row slots
        self._turn: Turn | None = None  # its slot while it runs rows one at a time
        self.joined = asyncio.Event()  # it has its place in the process's row slots
        self._recorder = RowRecorder(
            record,
            context.writer,
            fence=Fence(held.worker_id, held.chunk),
            flush_rows=self._config.flush_rows,
            hold_after=limit,
            on_status=self._stored_status,
            on_failure=lambda _: self.stop(StopReason.STORAGE),
            completed_step=(DRY_RUN_STEP, DRY_RUN_STEP_INDEX) if record.dry_run else None,
        )
        # Where its rows' outcomes go, whatever runs them: here, or in a row helper.
        self._sink = RecordingSink(self._recorder, context.metrics, record.operation_name)

    @property
    def waiting(self) -> bool:
        """Set up ahead of its rows, which wait for another run's (a chunk claimed ahead)."""
        return False

    def stop(self, reason: StopReason) -> None:
        """Interrupt processing; rows already finished are still recorded."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._work is not None and not self._work.done():
            self._work.cancel()

    def _stored_status(self, status: OperationStatus | None) -> None:
        if status is OperationStatus.CANCELLED:
            self.stop(StopReason.CANCELLED)
        elif status not in HELD_STATUSES:
            self.stop(StopReason.LOST)

    def _seen(self, record: OperationRecord) -> None:
        budget = self._sink.budget
        if budget is not None:
            budget.observe(record.error_count, self._recorder.failed_written)

    async def execute(self) -> None:
        """Process to the end and record the outcome."""
        operation_scope(self.record.id)  # this task's log lines, and its children's
        enter_processing_lane()  # its reads never queue behind the API's
        with span(
            "bulkops.operation",
            **{
                "bulkops.operation.id": str(self.record.id),
                "bulkops.operation.name": self.record.operation_name,
                "bulkops.chunk": self._held.chunk,
            },
        ):
            await self._execute()

    async def _execute(self) -> None:
        lease = Lease(
            self._stores.operations,
            self._stores.chunks,
            self._held,
            check_interval=self._config.flush_interval,
            heartbeat_interval=self._config.heartbeat_interval,
            on_lost=self._stored_status,
            on_record=self._seen,
        )
        watcher = asyncio.create_task(lease.run())
        self._recorder.start()
        self._work = asyncio.create_task(self._process())
        failure: str | None = None
        try:
            await self._work
            budget = self._sink.budget
            if budget is not None and budget.exceeded is not None:
                failure = budget.exceeded
        except asyncio.CancelledError:
            if self.stop_reason is None:  # our own caller was cancelled
                self.stop_reason = StopReason.SHUTDOWN
        except (OperationFailed, FileFormatError) as exc:
            failure = str(exc)
        except StorageError:
            log.exception(
                "Storage failed while processing %s; leaving it to be resumed", self.record.id
            )
            self.stop_reason = StopReason.STORAGE
        except Exception as exc:  # a defect must not leave the operation Running forever
            log.exception("Unexpected error while processing %s", self.record.id)
            failure = f"Internal error: {error_text(exc)}"
        finally:
            self._leave_share()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        try:
            await self._record_the_rest()
            await self._conclude(Ending(self.stop_reason, failure))
        except StorageError:
            log.exception("Could not record the end of %s; it will be resumed", self.record.id)

    async def _record_the_rest(self) -> None:
        if self.stop_reason is StopReason.STORAGE:
            await self._recorder.abandon()
            return
        try:
            await self._recorder.close()
        except StorageError:
            self.stop_reason = StopReason.STORAGE
            raise

    async def _process(self) -> None:
        raise NotImplementedError

    async def _conclude(self, ending: Ending) -> None:
        raise NotImplementedError

    def _definition(self) -> OperationDefinition:
        definition = self._context.registry.get(self.record.operation_name)
        if definition is None:
            raise OperationFailed(
                f"Operation {self.record.operation_name!r} is not registered in this worker"
            )
        return definition

    def _join_share(self, instance: OperationBase[Any, Any], metadata: Metadata) -> None:
        """Take a place in the process's row slots: its rows take their slots from there."""
        share = self._context.share
        if share is None or self._claimant is not None:
            return
        limit = self._config.max_row_concurrency
        tenant = tenant_of(self.record, instance, metadata)
        claimant = share.join(
            self.record.id, tenant, self.record.priority, limit, ahead=self.waiting
        )
        self._claimant = claimant
        self.joined.set()
        if limit > 1:
            self._slots = SharedSlots(limit, share, claimant)
        else:
            self._turn = Turn(share, claimant)

    def _leave_share(self) -> None:
        if self._claimant is not None and self._context.share is not None:
            if self._turn is not None:
                self._turn.release()
            self._context.share.leave(self._claimant)

    async def _prepare(self, definition: OperationDefinition, total: int) -> Runner:
        metadata, instance = await instantiate(definition, self.record.metadata)
        self._join_share(instance, metadata)
        if self.record.dry_run:  # every row is validated: no failure budget, no pacing
            created_by = self.record.created_by
            return DryRunner(definition, instance, metadata, self.record.id, created_by=created_by)
        controls, failed = definition.controls, 0
        if controls.limits_failures:
            # Only operations with a budget pay for counting their failed rows.
            failed = await self._retry.call(self._stores.operations.failed_rows, self.record.id)
        self._sink.budget = FailureBudget(controls, total, failed)
        waiting = self._slots or (TurnSlots(self._turn) if self._turn is not None else None)
        pacer = Pacer(self._context.gate, waiting)
        basics = (definition, instance, metadata, self.record.id)
        created_by = self.record.created_by
        undo = self.record.undo_of is not None  # an undo runs row by row, whatever the kind
        if definition.is_batch and not undo:
            return BatchRunner(*basics, pacer=pacer, created_by=created_by)
        if not definition.is_step_based and not undo:
            return RowRunner(*basics, pacer=pacer, created_by=created_by)
        return (UndoRunner if undo else PipelineRunner)(
            *basics,
            pacer=pacer,
            created_by=created_by,
            rows=self._stores.rows,
            hub=self._context.hub,
            fence=Fence(self._held.worker_id, self._held.chunk),
            retry=self._retry,
            signal_poll_interval=self._config.signal_poll_interval,
            retry_delay=self._config.step_retry_delay,
            metrics=self._context.metrics,
        )

    async def _run(self, rows: RowBatches, runner: Runner) -> None:
        if isinstance(runner, BatchRunner):
            await self._run_batches(rows, runner)
        elif self._slots is None or (isinstance(runner, DryRunner) and runner.direct):
            await self._run_sequential(rows, runner)
        else:
            await self._run_window(rows, runner)

    async def _run_sequential(self, rows: RowBatches, runner: PlainRunner | PipelineRunner) -> None:
        sink, recorder, turn = self._sink, self._recorder, self._turn
        fresh = runner if isinstance(runner, RowRunner | DryRunner) and runner.plain else None
        took, clock = self._context.metrics.row_timer(self.record.operation_name), perf_counter
        resume_by = clock() + SLICE_SECONDS
        async for batch in rows:
            plain: list[RawRow] = []  # fresh rows of a plain operation, run together
            for raw, existing in batch:
                if fresh is not None and existing is None:
                    plain.append(raw)
                    continue
                if fresh is not None and plain and await self._run_plain(fresh, plain):
                    return
                plain = []
                if turn is not None:
                    await turn.hold()
                started = clock()
                sink.record(await runner.run(raw, existing))
                took(elapsed := clock() - started)
                if turn is not None and turn.ran(1, elapsed):
                    await turn.pass_on()
                if sink.halted:
                    return  # no further row starts
            if fresh is not None and plain and await self._run_plain(fresh, plain):
                return
            if recorder.full:
                if turn is not None:
                    turn.release()  # nobody's rows wait for this one's writes
                await recorder.wait_room()
            if clock() >= resume_by:  # let HTTP requests and other operations in
                await asyncio.sleep(0)
                resume_by = clock() + SLICE_SECONDS

    async def _run_plain(self, fresh: PlainRunner, raws: list[RawRow]) -> bool:
        """Run fresh rows of a plain operation (``loops.run_plain``) in turns of the
        process's row slots (as many rows a turn as fit in ``fair_share.QUANTUM`` at their
        pace: the whole batch when they are fast); True when the failure budget is spent."""
        turn, sink = self._turn, self._sink
        if turn is None:
            return await run_plain(fresh, raws, sink)
        start, clock = 0, perf_counter
        while start < len(raws):
            await turn.hold()
            end = min(len(raws), start + turn.rows_per_turn)
            part = raws if start == 0 and end == len(raws) else raws[start:end]
            began = clock()
            if await run_plain(fresh, part, sink):
                return True
            if turn.ran(end - start, clock() - began):
                await turn.pass_on()
            start = end
        return False

    async def _run_window(self, rows: RowBatches, runner: PlainRunner | PipelineRunner) -> None:
        window = Window(
            self._config.max_row_concurrency,
            self._slots,
            self._sink.record,
            self._recorder,
            timer=self._context.metrics.row_timer(self.record.operation_name),
        )
        try:
            async for batch in rows:
                for raw, existing in batch:
                    if self._sink.halted:
                        break
                    await window.launch(runner.run(raw, existing))
                if self._sink.halted:
                    break
            await window.finish()
        finally:
            await window.cancel()

    async def _run_batches(self, rows: RowBatches, runner: BatchRunner) -> None:
        slots = self._slots
        if slots is None and self._claimant is not None and self._context.share is not None:
            slots = SharedSlots(1, self._context.share, self._claimant)
        sink = self._sink
        window = Window(self._config.max_row_concurrency, slots, sink.record, self._recorder)
        try:
            await run_batches(runner, rows, sink, window.launch)
            await window.finish()
        finally:
            await window.cancel()
