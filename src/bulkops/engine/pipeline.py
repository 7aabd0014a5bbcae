"""Running one data row of a pipeline operation through its steps."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from bulkops.clock import utcnow
from bulkops.definition.models import Row
from bulkops.definition.operation import OperationBase, OperationDefinition, StepDefinition
from bulkops.definition.row_context import row_frame, row_restart
from bulkops.definition.steps import StepKind
from bulkops.engine.invoke import error_text, invoke
from bulkops.engine.persistence import StorageRetry
from bulkops.engine.rows import RowBasics
from bulkops.engine.signals import SignalHub, SignalWatch, scoped_key
from bulkops.formats import RawRow
from bulkops.observability.metrics import Metrics
from bulkops.observability.tracing import span
from bulkops.storage import lifecycle
from bulkops.storage.ports import RowStore
from bulkops.storage.records import Fence, ProgressDelta, RowRecord, WaitOutcome
from bulkops.storage.states import ErrorType, RowState

MAX_BACKOFF = 30.0

Failure = tuple[ErrorType, str]


@dataclass(frozen=True, slots=True)
class BoundStep:
    """A step with its callables bound to one operation instance."""

    definition: StepDefinition
    action: Callable[..., Any]
    key: Callable[..., Any] | None = None
    check: Callable[..., Any] | None = None


def bind_steps(
    definition: OperationDefinition, instance: OperationBase[Any, Any]
) -> list[BoundStep]:
    """Resolve each step's action, key and check on ``instance``."""
    objects = {}
    if any(step.method_name is None for step in definition.steps):
        objects = {item.name: item for item in instance.steps()}  # type: ignore[attr-defined]
    bound = []
    for step in definition.steps:
        if step.method_name is not None:
            check = getattr(instance, step.check_name) if step.check_name else None
            action = getattr(instance, step.method_name)
            bound.append(BoundStep(step, action, step.key, check))
        else:
            item = objects[step.name]
            key = step.key if step.kind is StepKind.SIGNAL else None
            check = getattr(item, "check", None) if step.kind is StepKind.POLLING else None
            bound.append(BoundStep(step, item.run, key, check))
    return bound


def backoff_delay(attempt: int, base: float) -> float:
    """Exponential backoff with jitter for the ``attempt``-th retry, capped at 30 s."""
    if base <= 0:
        return 0.0
    return min(MAX_BACKOFF, base * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.0)


def _timeout_message(step: StepDefinition) -> str:
    return f"Step '{step.name}' timed out after {step.timeout:g} s"


class PipelineRunner(RowBasics):
    """Runs rows through an ordered list of steps, with per-step retries and async waits."""

    def __init__(
        self,
        *args: Any,
        rows: RowStore,
        hub: SignalHub,
        fence: Fence,
        retry: StorageRetry,
        signal_poll_interval: float,
        retry_delay: float,
        metrics: Metrics | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._metrics = metrics or Metrics()
        self._rows = rows
        self._fence = fence
        self._storage = retry
        self._hub = hub
        self._watch = SignalWatch(rows, hub, self.operation_id, interval=signal_poll_interval)
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
            return await self._wait(record, bound, row, state.signal_key or record.signal_key)
        retries = 0
        waiter: tuple[str, asyncio.Future[RowRecord]] | None = None
        while True:
            self._mark(record, step, retries + 1)
            state.attempts += 1
            state.state = RowState.RUNNING
            state.started_at = state.started_at or utcnow()
            try:
                waiter = await self._begin_wait(record, bound, row)
            except Exception as exc:
                return ErrorType.STEP_FAILURE, f"Signal key failed: {error_text(exc)}"
            if step.rate_limit is not None:
                await self.pace(step.name, step.rate_limit)
            try:
                await invoke(bound.action, row, self.metadata)
                break
            except Exception as exc:
                if waiter is not None and not await self._abandon_wait(
                    record, step, waiter[0], exc
                ):
                    return await self._follow(record, step, await self._stored(record))
                if retries >= step.max_retries:
                    return ErrorType.STEP_FAILURE, error_text(exc)
                retries += 1
                await asyncio.sleep(backoff_delay(retries, self._retry_delay))
        if step.kind is StepKind.PLAIN:
            state.state, state.completed_at = RowState.COMPLETED, utcnow()
            return None
        if step.kind is StepKind.POLLING:
            await self._persist_waiting(record, step, None)
            return await self._poll(record, bound, row)
        if waiter is None:
            return ErrorType.SIGNAL_FAILURE, "Signal step has no key function"
        return await self._wait_for_signal(record, step, *waiter)

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

    async def _begin_wait(
        self, record: RowRecord, bound: BoundStep, row: Row
    ) -> tuple[str, asyncio.Future[RowRecord]] | None:
        """For a signal step: register the waiter and store the waiting state and key, all
        before the action runs, so an early signal finds the row."""
        if bound.definition.kind is not StepKind.SIGNAL or bound.key is None:
            return None
        key = scoped_key(self.operation_id, str(bound.key(row, self.metadata)), record.row_number)
        future = self._hub.register(key)
        await self._persist_waiting(record, bound.definition, key)
        return key, future

    async def _abandon_wait(
        self, record: RowRecord, step: StepDefinition, key: str, exc: Exception
    ) -> bool:
        """The action failed: end the stored wait. False when a signal ended it first."""
        self._hub.unregister(key)
        outcome = WaitOutcome(step.index, False, utcnow(), ErrorType.STEP_FAILURE, error_text(exc))
        return await self._resolve(record, key, outcome) is not None

    async def _resolve(
        self, record: RowRecord, key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        return await self._storage.call(
            self._rows.resolve_wait, self.operation_id, record.row_number, key, outcome
        )

    async def _persist_waiting(
        self, record: RowRecord, step: StepDefinition, key: str | None
    ) -> None:
        """Store the row as waiting at ``step`` (under ``key`` for a signal step); the wait's
        clock starts now, a retried or resumed step's included."""
        waiting = lifecycle.start_waiting(record, step.index, key, utcnow())
        record.state, record.steps = waiting.state, waiting.steps
        record.signal_key, record.waiting_since = waiting.signal_key, waiting.waiting_since
        snapshot = replace(waiting, steps=[replace(s) for s in waiting.steps])
        await self._storage.call(
            self._rows.save, self.operation_id, [snapshot], ProgressDelta(), fence=self._fence
        )

    def _deadline_left(self, step: StepDefinition, record: RowRecord) -> float | None:
        """Seconds left of an async step's timeout, counted from when its wait began."""
        if step.timeout is None:
            return None
        started = record.waiting_since or utcnow()
        deadline = started + timedelta(seconds=step.timeout)
        return (deadline - utcnow()).total_seconds()

    async def _wait(
        self, record: RowRecord, bound: BoundStep, row: Row, key: str | None
    ) -> Failure | None:
        """Wait again after a restart: the action already ran."""
        if bound.definition.kind is StepKind.POLLING:
            return await self._poll(record, bound, row)
        if key is None:
            return ErrorType.SIGNAL_FAILURE, "Waiting row has no signal key"
        return await self._wait_for_signal(record, bound.definition, key, self._hub.register(key))

    async def _wait_for_signal(
        self,
        record: RowRecord,
        step: StepDefinition,
        key: str,
        future: asyncio.Future[RowRecord],
    ) -> Failure | None:
        self._watch.watch(key, record.row_number)  # a signal recorded by another process
        try:
            while True:
                left = self._deadline_left(step, record)
                if left is not None and left <= 0:
                    return await self._time_out(record, step, key)
                await asyncio.wait({future}, timeout=left)
                if future.done():
                    return await self._follow(record, step, future.result())
        finally:
            self._watch.unwatch(key)
            self._hub.unregister(key)

    async def _time_out(self, record: RowRecord, step: StepDefinition, key: str) -> Failure | None:
        message = _timeout_message(step)
        outcome = WaitOutcome(step.index, False, utcnow(), ErrorType.TIMEOUT, message)
        ended = await self._resolve(record, key, outcome)
        if ended is None:  # a signal got there first: it wins
            return await self._follow(record, step, await self._stored(record))
        return ErrorType.TIMEOUT, message

    async def _stored(self, record: RowRecord) -> RowRecord | None:
        return await self._storage.call(self._rows.get_row, self.operation_id, record.row_number)

    async def _follow(
        self, record: RowRecord, step: StepDefinition, stored: RowRecord | None
    ) -> Failure | None:
        """Adopt the outcome a signal (or our own write) stored for the waiting step."""
        if stored is None or len(stored.steps) <= step.index:
            return ErrorType.SIGNAL_FAILURE, "The waiting row's record is gone"
        outcome = stored.steps[step.index]
        state = record.steps[step.index]
        state.completed_at, state.actor = outcome.completed_at, outcome.actor
        if outcome.state is RowState.COMPLETED:
            state.state = RowState.COMPLETED
            record.state = RowState.RUNNING
            return None
        return (
            outcome.error_type or stored.error_type or ErrorType.SIGNAL_FAILURE,
            outcome.error_message or stored.error_message or "Signalled failure",
        )

    async def _poll(self, record: RowRecord, bound: BoundStep, row: Row) -> Failure | None:
        step, state = bound.definition, record.steps[bound.definition.index]
        if bound.check is None:
            return ErrorType.STEP_FAILURE, f"Polling step '{step.name}' has no completion check"
        while True:
            try:
                done = await invoke(bound.check, row, self.metadata)
            except Exception as exc:
                return ErrorType.STEP_FAILURE, f"Completion check failed: {error_text(exc)}"
            if done:
                state.state, state.completed_at = RowState.COMPLETED, utcnow()
                record.state = RowState.RUNNING
                return None
            left = self._deadline_left(step, record)
            if left is not None and left <= 0:
                return ErrorType.TIMEOUT, _timeout_message(step)
            pause = step.poll_interval if left is None else min(left, step.poll_interval)
            await asyncio.sleep(pause)
