"""How a row of a pipeline waits at an async step: for a signal, or for a completion check
it polls, until the step's timeout."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import StepDefinition
from bulkops.definition.steps import StepKind
from bulkops.engine.bound_steps import BoundStep, Failure
from bulkops.engine.invoke import error_text, invoke
from bulkops.engine.signals import SignalHub, SignalWatch, scoped_key
from bulkops.storage import lifecycle
from bulkops.storage.ports import RowStore
from bulkops.storage.records import Fence, ProgressDelta, RowRecord, WaitOutcome
from bulkops.storage.states import ErrorType, RowState

if TYPE_CHECKING:
    from bulkops.engine.ports import StorageCalls

# A signal step's waiter: its scoped key, and the future a signal resolves.
Waiter = tuple[str, asyncio.Future[RowRecord]]


def _timeout_message(step: StepDefinition) -> str:
    return f"Step '{step.name}' timed out after {step.timeout:g} s"


class StepWaits:
    """The waits of one operation's rows at its signal and polling steps.

    A signal step's waiter is registered, and the row stored as waiting under its key,
    before the step's action runs, so an early signal finds the row; a signal recorded by
    another process reaches it through ``watch``. A wait ends with the signal's outcome,
    the check's, or a timeout counted from when the wait began; when a signal and our own
    end of the wait race, the one stored first wins and the row follows it.
    """

    def __init__(
        self,
        *,
        operation_id: UUID,
        metadata: Metadata,
        rows: RowStore,
        hub: SignalHub,
        watch: SignalWatch,
        fence: Fence,
        storage: StorageCalls,
    ) -> None:
        self._operation_id = operation_id
        self._metadata = metadata
        self._rows = rows
        self._hub = hub
        self._watch = watch
        self._fence = fence
        self._storage = storage

    async def begin(self, record: RowRecord, bound: BoundStep, row: Row) -> Waiter | None:
        """For a signal step: register the waiter and store the waiting state and key, all
        before the action runs, so an early signal finds the row."""
        if bound.definition.kind is not StepKind.SIGNAL or bound.key is None:
            return None
        key = scoped_key(self._operation_id, str(bound.key(row, self._metadata)), record.row_number)
        future = self._hub.register(key)
        await self.store_waiting(record, bound.definition, key)
        return key, future

    async def abandon(
        self, record: RowRecord, step: StepDefinition, key: str, exc: Exception
    ) -> bool:
        """The action failed: end the stored wait. False when a signal ended it first."""
        self._hub.unregister(key)
        outcome = WaitOutcome(step.index, False, utcnow(), ErrorType.STEP_FAILURE, error_text(exc))
        return await self._resolve(record, key, outcome) is not None

    async def store_waiting(self, record: RowRecord, step: StepDefinition, key: str | None) -> None:
        """Store the row as waiting at ``step`` (under ``key`` for a signal step); the wait's
        clock starts now, a retried or resumed step's included."""
        waiting = lifecycle.start_waiting(record, step.index, key, utcnow())
        record.state, record.steps = waiting.state, waiting.steps
        record.signal_key, record.waiting_since = waiting.signal_key, waiting.waiting_since
        snapshot = replace(waiting, steps=[replace(s) for s in waiting.steps])
        await self._storage.call(
            self._rows.save, self._operation_id, [snapshot], ProgressDelta(), fence=self._fence
        )

    async def resume(
        self, record: RowRecord, bound: BoundStep, row: Row, key: str | None
    ) -> Failure | None:
        """Wait again after a restart: the action already ran."""
        if bound.definition.kind is StepKind.POLLING:
            return await self.poll(record, bound, row)
        if key is None:
            return ErrorType.SIGNAL_FAILURE, "Waiting row has no signal key"
        return await self.for_signal(record, bound.definition, (key, self._hub.register(key)))

    async def for_signal(
        self, record: RowRecord, step: StepDefinition, waiter: Waiter
    ) -> Failure | None:
        """Wait for the signal of ``waiter`` (or the step's timeout), and follow it."""
        key, future = waiter
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

    async def follow_stored(self, record: RowRecord, step: StepDefinition) -> Failure | None:
        """Adopt the outcome stored for the waiting step (a signal ended the wait first)."""
        return await self._follow(record, step, await self._stored(record))

    async def poll(self, record: RowRecord, bound: BoundStep, row: Row) -> Failure | None:
        """Call a polling step's completion check until it says done (or the timeout)."""
        step, state = bound.definition, record.steps[bound.definition.index]
        if bound.check is None:
            return ErrorType.STEP_FAILURE, f"Polling step '{step.name}' has no completion check"
        while True:
            try:
                done = await invoke(bound.check, row, self._metadata)
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

    async def _resolve(
        self, record: RowRecord, key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        return await self._storage.call(
            self._rows.resolve_wait, self._operation_id, record.row_number, key, outcome
        )

    def _deadline_left(self, step: StepDefinition, record: RowRecord) -> float | None:
        """Seconds left of an async step's timeout, counted from when its wait began."""
        if step.timeout is None:
            return None
        started = record.waiting_since or utcnow()
        deadline = started + timedelta(seconds=step.timeout)
        return (deadline - utcnow()).total_seconds()

    async def _time_out(self, record: RowRecord, step: StepDefinition, key: str) -> Failure | None:
        message = _timeout_message(step)
        outcome = WaitOutcome(step.index, False, utcnow(), ErrorType.TIMEOUT, message)
        ended = await self._resolve(record, key, outcome)
        if ended is None:  # a signal got there first: it wins
            return await self.follow_stored(record, step)
        return ErrorType.TIMEOUT, message

    async def _stored(self, record: RowRecord) -> RowRecord | None:
        return await self._storage.call(self._rows.get_row, self._operation_id, record.row_number)

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
