"""A run: one worker's processing of an operation, or of one chunk of it, from rows to
records, stopping, and its end.

A run of a whole operation and a run of a chunk are the same class; what differs is its
``Scope`` (``engine/scope.py``), which drives it as a ``ScopedRun``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable
from typing import Generic, TypeVar

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.context import EngineContext
from bulkops.engine.dry_run import DRY_RUN_STEP, DRY_RUN_STEP_INDEX, DryRunner
from bulkops.engine.feed import RowFeed, Runner
from bulkops.engine.heartbeat import Held
from bulkops.engine.instance import OperationFailed, instantiate
from bulkops.engine.invoke import error_text
from bulkops.engine.pacing import Pacer
from bulkops.engine.recorder import RowRecorder
from bulkops.engine.resume import RowBatch
from bulkops.engine.runners import runner_for
from bulkops.engine.scope import Ending, Scope, StopReason
from bulkops.engine.sink import RecordingSink
from bulkops.engine.window import FailureBudget
from bulkops.errors import FileFormatError, StorageError
from bulkops.observability.logs import operation_scope
from bulkops.observability.tracing import span
from bulkops.storage.lanes import enter_processing_lane
from bulkops.storage.lifecycle import HELD_STATUSES
from bulkops.storage.records import Fence, OperationRecord
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.engine")


S = TypeVar("S", bound=Scope)


class Run(Generic[S]):
    """Processes rows of one operation for one worker and records them; ``scope`` says
    which rows and how the run ends."""

    def __init__(self, context: EngineContext, record: OperationRecord, scope: S) -> None:
        held = Held(record.id, context.config.worker_id, scope.chunk)
        self.scope = scope
        self.context = context
        self._context = context
        self._stores = context.stores
        self._config = context.config
        self._retry = context.retry
        self.record = record
        self._held = held
        self.stop_reason: StopReason | None = None
        self._work: asyncio.Task[None] | None = None
        self._runner: Runner | None = None  # once prepared
        limit = self._config.max_row_concurrency
        self._recorder = RowRecorder(
            record,
            context.writer,
            fence=Fence(held.worker_id, held.chunk),
            flush_rows=self._config.flush_rows,
            hold_after=limit,
            run=self,
            completed_step=(DRY_RUN_STEP, DRY_RUN_STEP_INDEX) if record.dry_run else None,
        )
        # Where its rows' outcomes go, whatever runs them: here, or in a row helper.
        self._sink = RecordingSink(self._recorder, context.metrics, record.operation_name)
        self._feed = RowFeed(context, record, self._sink, self._recorder)

    @property
    def waiting(self) -> bool:
        """Set up ahead of its rows, which wait for another run's (a chunk claimed ahead)."""
        return self.scope.waiting

    @property
    def sink(self) -> RecordingSink:
        """Where its rows' outcomes go, whatever runs them."""
        return self._sink

    @property
    def recorder(self) -> RowRecorder:
        """Its rows' buffer on their way to storage."""
        return self._recorder

    @property
    def joined(self) -> asyncio.Event:
        """Set once it has its place in the process's row slots."""
        return self._feed.joined

    def pass_turn(self) -> None:
        """Give up its slot while it runs no rows (it runs rows one at a time)."""
        self._feed.pass_turn()

    def stop(self, reason: StopReason) -> None:
        """Interrupt processing; rows already finished are still recorded."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._work is not None and not self._work.done():
            self._work.cancel()

    def lost(self, status: OperationStatus | None) -> None:
        """Stop unless ``status`` (the stored status; None: the record vanished or another
        worker holds it) is one it holds: cancelled, or moved on (``heartbeat.Holder``)."""
        if status is OperationStatus.CANCELLED:
            self.stop(StopReason.CANCELLED)
        elif status not in HELD_STATUSES:
            self.stop(StopReason.LOST)

    def unstored(self, error: BaseException) -> None:
        """Its rows could not be stored: it stops, left to be resumed."""
        self.stop(StopReason.STORAGE)

    def seen(self, record: OperationRecord) -> None:
        """The operation as stored at a check (``heartbeat.Holder``): its failures count
        toward the failure budget."""
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
        hold = self._context.heartbeat.hold(self._held, self)
        self._recorder.start()
        self._work = asyncio.create_task(self.scope.process(self))
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
            self._feed.leave()
            hold.release()
        try:
            await self._record_the_rest()
            await self.scope.conclude(self, Ending(self.stop_reason, failure))
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

    def definition(self) -> OperationDefinition:
        """The operation's definition in this process's registry."""
        definition = self._context.registry.get(self.record.operation_name)
        if definition is None:
            raise OperationFailed(
                f"Operation {self.record.operation_name!r} is not registered in this worker"
            )
        return definition

    async def prepare(self, definition: OperationDefinition, total: int) -> None:
        """Build the operation and the runner of its rows; take its place in the row slots."""
        self._runner = await self._build(definition, total)

    async def _build(self, definition: OperationDefinition, total: int) -> Runner:
        metadata, instance = await instantiate(definition, self.record.metadata)
        self._feed.join(instance, metadata, ahead=self.waiting)
        if self.record.dry_run:  # every row is validated: no failure budget, no pacing
            created_by = self.record.created_by
            return DryRunner(definition, instance, metadata, self.record.id, created_by=created_by)
        controls, failed = definition.controls, 0
        if controls.limits_failures:
            # Only operations with a budget pay for counting their failed rows.
            failed = await self._retry.call(self._stores.operations.failed_rows, self.record.id)
        self._sink.budget = FailureBudget(controls, total, failed)
        pacer = Pacer(self._context.gate, self._feed.pacing_slots())
        fence = Fence(self._held.worker_id, self._held.chunk)
        return runner_for(
            self._context, self.record, definition, instance, metadata, pacer=pacer, fence=fence
        )

    @property
    def turn_seconds(self) -> float:
        """Seconds its rows ran in their turns of the process's row slots (0: it runs rows
        beside each other, or has had no turn)."""
        return self._feed.turn_seconds

    async def feed(self, rows: AsyncIterable[RowBatch]) -> None:
        """Run ``rows`` with the prepared runner, recording each outcome (``feed.RowFeed``)."""
        if self._runner is None:
            raise RuntimeError("a run feeds rows only once prepared")
        await self._feed.feed(rows, self._runner)
