"""Retrying failed rows: eligibility, retry rounds, and their history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition, StepDefinition
from bulkops.definition.registry import Registry
from bulkops.errors import BadRequest, Conflict, NotFound
from bulkops.service.ports import WorkQueue
from bulkops.service.queries import clamp_paging
from bulkops.storage.ports import OperationStore, RetryStore, RowStore
from bulkops.storage.records import OperationRecord, Page, RetryRequest, RetrySnapshot, RowQuery
from bulkops.storage.states import OperationStatus, RowState

TRACK_ROW_DATA_REASON = "TrackRowData must be enabled for retry"
VALIDATION_STEP_NAME = "validation"
MAX_ROW_NUMBERS = 10_000


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Whether an operation may be retried now, and why not."""

    is_eligible: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Restart:
    """A restart: the step the chosen rows run again from, and whether Completed rows
    (and a Completed operation) are taken too."""

    step_index: int
    include_completed: bool


@dataclass(slots=True)
class RetryResult:
    """What a retry request did."""

    rows_submitted: int = 0
    rows_skipped: int = 0
    skipped_reasons: list[str] = field(default_factory=list)


class RetryService:
    """Eligibility (the five rules of the spec), retry of all or chosen failed rows, and
    the retry history."""

    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        rows: RowStore,
        retries: RetryStore,
        work: WorkQueue,
        *,
        max_retry_attempts: int,
    ) -> None:
        self._registry = registry
        self._operations = operations
        self._rows = rows
        self._retries = retries
        self._work = work
        self._max_attempts = max_retry_attempts

    async def _get(self, operation_id: UUID) -> OperationRecord:
        record = await self._operations.get(operation_id)
        if record is None:
            raise NotFound(f"Operation {operation_id} not found")
        return record

    async def _failed(self, operation_id: UUID, step_name: str | None = None) -> int:
        """How many rows failed (at the named step, when given)."""
        query = RowQuery(
            operation_id=operation_id, page=1, page_size=1, failed_only=True, step_name=step_name
        )
        return (await self._rows.page(query)).total_count

    async def _check(
        self, record: OperationRecord, restart: Restart | None = None
    ) -> tuple[OperationDefinition | None, str | None]:
        definition = self._registry.get(record.operation_name)
        completed_too = restart is not None and restart.include_completed
        if record.status is not OperationStatus.COMPLETED_WITH_ERRORS and not (
            completed_too and record.status is OperationStatus.COMPLETED
        ):
            if completed_too:
                return definition, (
                    f"Operation is {record.status.value}; only CompletedWithErrors and "
                    "Completed operations can be restarted"
                )
            return definition, (
                f"Operation is {record.status.value}; only CompletedWithErrors operations "
                "can be retried"
            )
        if definition is None:
            return None, f"Operation {record.operation_name!r} is not registered here"
        # A retry of a dry run only validates again: nothing runs twice, so any operation's
        # dry run may be retried.
        # An undo operation's rows keep their data: its failed undos may be retried.
        undo = record.undo_of is not None
        if not definition.retryable and not record.dry_run and not undo:
            return definition, f"Operation {definition.name!r} is not retryable"
        if not definition.track_row_data and not undo:
            return definition, TRACK_ROW_DATA_REASON
        if self._max_attempts and record.retry_count >= self._max_attempts:
            return definition, (
                f"Retry limit reached: {record.retry_count} of {self._max_attempts} attempts used"
            )
        if restart is not None:
            return definition, None  # rows a restart chooses are counted as it resets them
        failed = await self._failed(record.id)
        invalid = await self._failed(record.id, VALIDATION_STEP_NAME)
        if failed - invalid <= 0 and not await self._rows.fixes(record.id, failed_only=True):
            # Validation failures are retried once fixed in place; the message stays as
            # clients know it.
            return definition, (
                "No failed rows can be retried: validation failures are never retried"
            )
        return definition, None

    async def eligibility(self, operation_id: UUID) -> Eligibility:
        """Whether the operation may be retried now (``NotFound`` when unknown)."""
        _, reason = await self._check(await self._get(operation_id))
        return Eligibility(is_eligible=reason is None, reason=reason)

    async def retry(
        self,
        operation_id: UUID,
        row_numbers: Sequence[int] | None = None,
        *,
        from_step: str | None = None,
        include_completed: bool = False,
        actor: str = "system",
        action_id: UUID | None = None,
    ) -> RetryResult:
        """Reset the failed rows (all, or those named) and queue the operation again.

        Rows that failed validation, rows that did not fail, and rows whose failing step
        forbids operation retry are skipped, each with a reason, unless they were fixed in
        place: a fixed Failed row is retried whatever it failed at. When nothing is left to
        submit the operation is unchanged.

        A restart (``from_step``, a step of a pipeline operation, or ``include_completed``,
        which also takes Completed rows and a Completed operation) runs the chosen rows
        again from that step (the first one when not named): earlier steps keep what they
        reached, that step and the later ones run again under new idempotency keys. It is
        a retry round like any other (history, ``retryCount``, the attempt limit).
        ``actor`` caused it; ``action_id``: the bulk action asking.

        Raises:
            NotFound: unknown operation.
            BadRequest: an empty or oversized ``row_numbers`` list; ``from_step`` naming no
                step, or given for an operation without steps.
            Conflict: the operation is not eligible (carries the reason).
        """
        if row_numbers is not None and not row_numbers:
            raise BadRequest("rowNumbers must list at least one row number")
        if row_numbers is not None and len(row_numbers) > MAX_ROW_NUMBERS:
            raise BadRequest(f"rowNumbers may list at most {MAX_ROW_NUMBERS} rows per request")
        record = await self._get(operation_id)
        restart = self._restart(record, from_step, include_completed)
        definition, reason = await self._check(record, restart)
        if reason is not None or definition is None:
            message = reason or "not retryable"
            raise Conflict(f"Cannot retry operation: {message}", reason=message)
        allowed = tuple(s.index for s in definition.steps if s.allow_operation_retry)
        if restart is not None:  # the operator chose the step: every step qualifies
            allowed = tuple(s.index for s in definition.steps)
        result = RetryResult()
        chosen: tuple[int, ...] | None = None
        if row_numbers is None:
            if restart is None:
                await self._skip_disallowed_steps(record, definition, result)
        else:
            chosen = await self._choose_rows(record, definition, row_numbers, result, restart)
            if not chosen:
                return result
        now = utcnow()
        request = RetryRequest(record.id, record.version, allowed, chosen, actor=actor)
        if restart is not None:
            request = replace(
                request,
                from_step=restart.step_index,
                include_completed=restart.include_completed,
            )
        if action_id is not None:
            request = replace(request, action_id=action_id)
        started = await self._retries.begin_retry(request, now)
        if started is None:
            raise Conflict(
                "Cannot retry operation: it changed meanwhile; try again",
                reason="The operation changed meanwhile",
            )
        result.rows_submitted = started.rows_reset
        if started.rows_reset:
            self._work.enqueue(record.id)
        return result

    def _restart(
        self, record: OperationRecord, from_step: str | None, include_completed: bool
    ) -> Restart | None:
        """The restart asked for (None: a plain retry); BadRequest for a step that is not
        one of the operation's."""
        if from_step is None and not include_completed:
            return None
        if from_step is None:
            return Restart(0, include_completed)
        definition = self._registry.get(record.operation_name)
        if definition is None:
            return Restart(0, include_completed)  # _check refuses it: not registered here
        if not definition.is_step_based:
            raise BadRequest(
                f"fromStep applies only to pipeline operations; {definition.name!r} has no steps"
            )
        names = [step.name for step in definition.steps]
        for step in definition.steps:
            if step.name == from_step or step.name.casefold() == from_step.casefold():
                return Restart(step.index, include_completed)
        listed = ", ".join(repr(name) for name in names)
        raise BadRequest(f"Unknown step {from_step!r}: the steps are {listed}")

    async def _skip_disallowed_steps(
        self, record: OperationRecord, definition: OperationDefinition, result: RetryResult
    ) -> None:
        fixed_steps: list[int] | None = None  # the failed steps of the fixed rows
        for step in definition.steps:
            if step.allow_operation_retry:
                continue
            count = await self._failed(record.id, step.name)
            if count and fixed_steps is None:
                fixed_steps = await self._fixed_steps(record.id)
            count -= (fixed_steps or []).count(step.index)  # fixed rows are retried
            if count:
                result.rows_skipped += count
                result.skipped_reasons.append(_disallowed(step, count))

    async def _fixed_steps(self, operation_id: UUID) -> list[int]:
        fixed = await self._rows.fixes(operation_id, failed_only=True)
        rows = [await self._rows.get_row(operation_id, number) for number in fixed]
        return [row.step_index for row in rows if row is not None]

    async def _choose_rows(
        self,
        record: OperationRecord,
        definition: OperationDefinition,
        row_numbers: Sequence[int],
        result: RetryResult,
        restart: Restart | None = None,
    ) -> tuple[int, ...]:
        chosen = []
        numbers = sorted(set(row_numbers))
        fixed = await self._rows.fixes(record.id, row_numbers=numbers)
        for number in numbers:
            row = await self._rows.get_row(record.id, number)
            reason = None
            if row is None:
                reason = f"Row {number} does not exist or was never processed"
            elif (
                restart is not None
                and restart.include_completed
                and (row.state is RowState.COMPLETED)
            ):
                pass  # a restart with includeCompleted runs Completed rows again
            elif restart is not None and row.state is RowState.FAILED and row.step_index >= 0:
                pass  # the operator chose the step: whatever the row failed at
            elif row.state is not RowState.FAILED:
                reason = f"Row {number} has not failed (it is {row.state.value})"
            elif number in fixed:
                pass  # a fixed row runs again whatever it failed at
            elif row.step_index < 0:
                # (unless fixed in place: the message predates fixes and stays as it was)
                reason = f"Row {number} failed validation, which is never retried"
            elif not definition.steps[row.step_index].allow_operation_retry:
                name = definition.steps[row.step_index].name
                reason = f"Row {number} failed at step '{name}', which does not allow retry"
            if reason is None:
                chosen.append(number)
            else:
                result.rows_skipped += 1
                result.skipped_reasons.append(reason)
        return tuple(chosen)

    async def history(
        self,
        operation_id: UUID,
        *,
        row_number: int | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Page[RetrySnapshot]:
        """Retry history entries by row number, then attempt."""
        await self._get(operation_id)
        number, size = clamp_paging(page, page_size)
        return await self._retries.history(
            operation_id, row_number=row_number, page=number, page_size=size
        )


def _disallowed(step: StepDefinition, count: int) -> str:
    rows = "1 row" if count == 1 else f"{count} rows"
    return f"{rows} failed at step '{step.name}', which does not allow operation retry"
