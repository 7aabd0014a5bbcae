"""Running one data row of a pipeline operation through its steps."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bulkops.clock import utcnow
from bulkops.definition.models import Row
from bulkops.definition.operation import StepDefinition
from bulkops.definition.row_context import row_frame, row_restart
from bulkops.definition.steps import StepKind
from bulkops.engine.bound_steps import BoundStep, Failure, bind_steps
from bulkops.engine.invoke import error_text, invoke
from bulkops.engine.rows import RowBasics
from bulkops.engine.signals import SignalHub, SignalWatch
from bulkops.engine.step_waits import StepWaits, Waiter
from bulkops.formats import RawRow
from bulkops.observability.metrics import Metrics
from bulkops.observability.tracing import span
from bulkops.storage.ports import RowStore
from bulkops.storage.records import Fence, RowRecord
from bulkops.storage.states import ErrorType, RowState

if TYPE_CHECKING:
    from bulkops.engine.ports import StorageCalls

MAX_BACKOFF = 30.0


def backoff_delay(attempt: int, base: float) -> float:
    """Exponential backoff with jitter for the ``attempt``-th retry, capped at 30 s."""
    if base <= 0:
        return 0.0
    return min(MAX_BACKOFF, base * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.0)


class PipelineRunner(RowBasics):
    """Runs rows through an ordered list of steps, with per-step retries; the waits of
    signal and polling steps are its ``StepWaits``."""

    def __init__(
        self,
        *args: Any,
        rows: RowStore,
        hub: SignalHub,
        fence: Fence,
        retry: StorageCalls,
        signal_poll_interval: float,
        retry_delay: float,
        metrics: Metrics | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._metrics = metrics or Metrics()
        self._waits = StepWaits(
            operation_id=self.operation_id,
            metadata=self.metadata,
            rows=rows,
            hub=hub,
            watch=SignalWatch(rows, hub, self.operation_id, interval=signal_poll_interval),
            fence=fence,
            storage=retry,
        )
        self._retry_delay = retry_delay
        self._steps = bind_steps(self.definition, self.instance)

    async def run(self, raw: RawRow, existing: RowRecord | None = None) -> RowRecord:
        """Run a row's remaining steps; steps it already completed are skipped."""
        prepared = await self.prepare(raw, existing)
        if isinstance(prepared, RowRecord):
            return prepared
        row, row_id = prepared
        record = self._start(raw, row_id, existing)
        token = row_frame.set(None)  # each step marks itself for current_row()
        restart = row_restart.set(0)
        try:
            for bound in self._steps:
                step = bound.definition
                if record.steps[step.index].state is RowState.COMPLETED:
                    continue
                record.step_index, record.step_name = step.index, step.name
                started = time.perf_counter()
                attributes = {"bulkops.step": step.name, "bulkops.row": raw.number}
                with span("bulkops.step", **attributes):
                    failure = await self._run_step(record, bound, row)
                took = time.perf_counter() - started
                self._metrics.step_took(self.definition.name, step.name, took)
                if failure is not None:
                    return self._fail(record, step, *failure)
        finally:
            row_frame.reset(token)
            row_restart.reset(restart)
        record.state = RowState.COMPLETED
        record.error_type = record.error_message = None
        record.completed_at = utcnow()
        return record

    def _start(self, raw: RawRow, row_id: str | None, existing: RowRecord | None) -> RowRecord:
        record = self.new_record(raw, RowState.RUNNING, row_id)
        record.completed_at = None
        record.steps = self.pending_steps()
        if existing is not None:  # resumed or retried: keep its progress
            record.retry_attempt = existing.retry_attempt
            record.signal_key, record.waiting_since = existing.signal_key, existing.waiting_since
            if len(existing.steps) == len(record.steps):
                record.steps = [replace(step) for step in existing.steps]
        return record

    def _fail(
        self, record: RowRecord, step: StepDefinition, error_type: ErrorType, message: str
    ) -> RowRecord:
        now = utcnow()
        state = record.steps[step.index]
        state.state, state.error_type, state.error_message = RowState.FAILED, error_type, message
        state.completed_at = state.completed_at or now
        record.state, record.error_type, record.error_message = RowState.FAILED, error_type, message
        record.step_index, record.step_name, record.completed_at = step.index, step.name, now
        return record

    async def _run_step(self, record: RowRecord, bound: BoundStep, row: Row) -> Failure | None:
        step, state = bound.definition, record.steps[bound.definition.index]
        if state.state is RowState.WAITING_FOR_COMPLETION:  # resumed while waiting
            self._mark(record, step, max(state.attempts, 1))  # the action ran before
            return await self._waits.resume(
                record, bound, row, state.signal_key or record.signal_key
            )
        retries = 0
        waiter: Waiter | None = None
        while True:
            self._mark(record, step, retries + 1)
            state.attempts += 1
            state.state = RowState.RUNNING
            state.started_at = state.started_at or utcnow()
            try:
                waiter = await self._waits.begin(record, bound, row)
            except Exception as exc:
                return ErrorType.STEP_FAILURE, f"Signal key failed: {error_text(exc)}"
            if step.rate_limit is not None:
                await self.pace(step.name, step.rate_limit)
            try:
                await invoke(bound.action, row, self.metadata)
                break
            except Exception as exc:
                if waiter is not None and not await self._waits.abandon(
                    record, step, waiter[0], exc
                ):
                    return await self._waits.follow_stored(record, step)
                if retries >= step.max_retries:
                    return ErrorType.STEP_FAILURE, error_text(exc)
                retries += 1
                await asyncio.sleep(backoff_delay(retries, self._retry_delay))
        if step.kind is StepKind.PLAIN:
            state.state, state.completed_at = RowState.COMPLETED, utcnow()
            return None
        if step.kind is StepKind.POLLING:
            await self._waits.store_waiting(record, step, None)
            return await self._waits.poll(record, bound, row)
        if waiter is None:
            return ErrorType.SIGNAL_FAILURE, "Signal step has no key function"
        return await self._waits.for_signal(record, step, waiter)

    def _mark(self, record: RowRecord, step: StepDefinition, attempt: int) -> None:
        """Tell current_row() the step and attempt running (its wait and checks included)."""
        row_restart.set(record.steps[step.index].restart)
        row_frame.set(
            (
                self.scope,
                record.row_number,
                record.row_id,
                step.name,
                step.index,
                attempt,
                record.retry_attempt,
            )
        )
