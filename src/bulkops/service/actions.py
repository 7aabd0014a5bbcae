"""Bulk actions: retry, cancel or restart every operation a filter matches.

``ActionService`` previews, starts, reads, lists and cancels actions; ``ActionRunner``
acts on them, at a bounded pace, in whichever process runs it (every processing process
does). The matched operations are stored with the action, each acted on once: the act
stamps the operation's ``last_action_id`` in its own transaction, so a runner that takes
over an action whose runner died finds the operations acted on but not yet recorded and
records them without acting again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from bulkops.clock import utcnow
from bulkops.errors import BadRequest, Conflict, NotFound
from bulkops.service.commands import CommandService
from bulkops.service.retry import RetryService
from bulkops.storage.actions import ActionItem, ActionKind, ActionRecord, ActionStatus, Outcome
from bulkops.storage.ports import ActionStore, OperationStore
from bulkops.storage.records import OperationQuery, OperationRecord, Page
from bulkops.storage.states import OperationStatus

log = logging.getLogger("bulkops.actions")

PREVIEW_IDS = 25  # operation ids a preview lists
MAX_ITEMS = 1_000  # skipped and failed items an action's detail lists
_LIST_PAGE = 500  # operations read per page while matching
STALE_AFTER = timedelta(seconds=30)  # a runner silent this long is taken over


@dataclass(frozen=True, slots=True)
class ActionFilter:
    """Which operations an action matches: every condition given must hold."""

    ids: tuple[UUID, ...] | None = None
    operation_name: str | None = None
    statuses: tuple[OperationStatus, ...] | None = None
    created_by: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None

    @property
    def empty(self) -> bool:
        """Whether it names no condition (an action never matches "everything")."""
        return (
            not self.ids
            and not self.operation_name
            and not self.statuses
            and not self.created_by
            and self.created_from is None
            and self.created_to is None
        )

    def to_json(self) -> dict[str, Any]:
        """The filter as the API names it (conditions not given left out)."""
        found: dict[str, Any] = {}
        if self.ids:
            found["ids"] = [str(i) for i in self.ids]
        if self.operation_name:
            found["operationName"] = self.operation_name
        if self.statuses:
            found["status"] = [s.value for s in self.statuses]
        if self.created_by:
            found["createdBy"] = self.created_by
        if self.created_from is not None:
            found["from"] = self.created_from.isoformat()
        if self.created_to is not None:
            found["to"] = self.created_to.isoformat()
        return found

    def admits(self, record: OperationRecord) -> bool:
        """Whether an operation meets every condition but ``ids``."""
        return (
            (not self.operation_name or record.operation_name == self.operation_name)
            and (not self.statuses or record.status in self.statuses)
            and (not self.created_by or record.created_by == self.created_by)
            and (self.created_from is None or record.created_at >= self.created_from)
            and (self.created_to is None or record.created_at <= self.created_to)
        )


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What a caller asks: the action, its filter and its options."""

    action: ActionKind
    filter: ActionFilter
    from_step: str | None = None
    include_completed: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ActionPreview:
    """What an action would act on: how many operations, and the first of them."""

    matched: int
    operation_ids: Sequence[UUID]


@dataclass(frozen=True, slots=True)
class ActionDetail:
    """An action with its skipped and failed items."""

    record: ActionRecord
    items: Sequence[ActionItem]


class ActionService:
    """Preview, start, read, list and cancel bulk actions."""

    def __init__(self, actions: ActionStore, operations: OperationStore) -> None:
        self._actions = actions
        self._operations = operations
        self._started: list[asyncio.Event] = []  # runners of this process to wake

    def notify(self, event: asyncio.Event) -> None:
        """Set ``event`` whenever an action starts here (a runner of this process waits)."""
        self._started.append(event)

    async def match(self, wanted: ActionFilter, tenant: str | None) -> list[UUID]:
        """The operations ``wanted`` matches that ``tenant`` sees (None: every one),
        newest first."""
        if wanted.ids:
            found = []
            for operation_id in dict.fromkeys(wanted.ids):
                record = await self._operations.get(operation_id)
                if record is None or (tenant is not None and record.tenant != tenant):
                    continue
                if wanted.admits(record):
                    found.append(record)
            found.sort(key=lambda r: (r.created_at, str(r.id)), reverse=True)
            return [record.id for record in found]
        seen: dict[UUID, OperationRecord] = {}
        for status in wanted.statuses or (None,):
            page = 1
            while True:
                query = OperationQuery(
                    page=page,
                    page_size=_LIST_PAGE,
                    operation_name=wanted.operation_name or None,
                    status=status,
                    created_by=wanted.created_by or None,
                    created_from=wanted.created_from,
                    created_to=wanted.created_to,
                    tenant=tenant,
                )
                listed: Page[OperationRecord] = await self._operations.list(query)
                seen.update((record.id, record) for record in listed.items)
                if not listed.has_next_page:
                    break
                page += 1
        ordered = sorted(seen.values(), key=lambda r: (r.created_at, str(r.id)), reverse=True)
        return [record.id for record in ordered]

    def _check(self, request: ActionRequest) -> None:
        if request.filter.empty:
            raise BadRequest(
                "filter must name at least one condition (ids, operationName, status, "
                "createdBy, from, to): an action never acts on every operation"
            )
        restart = request.action is ActionKind.RESTART
        if request.from_step is not None and not restart:
            raise BadRequest("fromStep applies only to the restart action")
        if request.include_completed and not restart:
            raise BadRequest("includeCompleted applies only to the restart action")

    async def preview(self, request: ActionRequest, tenant: str | None) -> ActionPreview:
        """How many operations the action would act on, and the first ``PREVIEW_IDS``."""
        self._check(request)
        matched = await self.match(request.filter, tenant)
        return ActionPreview(len(matched), matched[:PREVIEW_IDS])

    async def start(
        self, request: ActionRequest, *, created_by: str, tenant: str | None
    ) -> ActionRecord:
        """Store the action with the operations it matches now; a runner acts on them."""
        self._check(request)
        matched = await self.match(request.filter, tenant)
        now = utcnow()
        record = ActionRecord(
            id=uuid4(),
            action=request.action,
            filter=request.filter.to_json(),
            status=ActionStatus.RUNNING if matched else ActionStatus.COMPLETED,
            matched=len(matched),
            created_by=created_by,
            created_at=now,
            tenant=tenant,
            from_step=request.from_step,
            include_completed=request.include_completed,
            reason=request.reason,
            completed_at=None if matched else now,
        )
        await self._actions.add_action(record, matched)
        for event in self._started:
            event.set()
        return record

    async def get(self, action_id: UUID, tenant: str | None) -> ActionDetail:
        """The action and its skipped and failed items (another tenant's: NotFound)."""
        record = await self._actions.get_action(action_id)
        if record is None or (tenant is not None and record.tenant != tenant):
            raise NotFound(f"Action {action_id} not found")
        items = await self._actions.action_items(
            action_id, (Outcome.SKIPPED, Outcome.FAILED), MAX_ITEMS
        )
        return ActionDetail(record, items)

    async def list(self, tenant: str | None, page: int, page_size: int) -> Page[ActionRecord]:
        """The caller's tenant's actions (every action for an unscoped caller), newest
        first."""
        return await self._actions.list_actions(
            tenant=tenant, scoped=tenant is not None, page=page, page_size=page_size
        )

    async def cancel(self, action_id: UUID, tenant: str | None) -> ActionRecord:
        """Stop a Running action: operations not acted on yet stay as they are (an act
        under way ends first). Conflict when it already ended."""
        detail = await self.get(action_id, tenant)
        ended = await self._actions.end_action(action_id, ActionStatus.CANCELLED, utcnow())
        if ended is None:
            status = detail.record.status.value
            current = await self._actions.get_action(action_id)
            if current is not None:
                status = current.status.value
            raise Conflict(f"Action is already {status} and cannot be cancelled", status=status)
        return ended


class ActionRunner:
    """Acts on the Running actions of the shared storage, one at a time, at most ``rate``
    operations per second; an action whose runner went quiet is taken over.

    Args:
        runner_id: this runner's name, stored as the holder of the action it runs.
        rate: operations acted on per second (BULKOPS_ACTION_RATE).
        poll_interval: seconds between looks for an action to run.
        stale_after: how long a runner may stay silent before another takes its action
            over (BULKOPS_ABANDON_AFTER, as for held operations).
    """

    def __init__(
        self,
        actions: ActionStore,
        operations: OperationStore,
        commands: CommandService,
        retries: RetryService,
        *,
        runner_id: str,
        rate: float,
        poll_interval: float = 1.0,
        stale_after: timedelta = STALE_AFTER,
    ) -> None:
        self._actions = actions
        self._operations = operations
        self._commands = commands
        self._retries = retries
        self._runner = runner_id
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._poll_interval = poll_interval
        self._stale_after = stale_after
        # A slow pace still renews the heartbeat well within the time it is trusted.
        self._beat_every = max(stale_after.total_seconds() / 4, 0.05)
        self.started = asyncio.Event()  # set when an action starts in this process

    async def run(self) -> None:
        """Run actions until cancelled."""
        while True:
            try:
                ran = await self.run_one()
            except Exception as exc:  # storage trouble: look again later
                log.warning("Bulk actions unavailable (%s); will try again", exc)
                ran = False
            if not ran:
                self.started.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.started.wait(), self._poll_interval)

    async def run_one(self) -> bool:
        """Claim one action and act on its pending operations; False when none was free."""
        now = utcnow()
        action = await self._actions.claim_action(self._runner, now, now - self._stale_after)
        if action is None:
            return False
        await self._work(action)
        return True

    async def _work(self, action: ActionRecord) -> None:
        next_at = time.monotonic()
        while True:
            items = await self._actions.action_items(action.id, (Outcome.PENDING,), 100)
            if not items:
                break
            for item in items:
                if not await self._beat(action.id):
                    return  # cancelled, or taken over by another runner
                while (delay := next_at - time.monotonic()) > 0:
                    await asyncio.sleep(min(delay, self._beat_every))
                    if not await self._beat(action.id):
                        return
                next_at = max(next_at, time.monotonic()) + self._interval
                outcome, reason = await self._act(action, item.operation_id)
                recorded = await self._actions.record_item(
                    action.id, item.position, outcome, reason, self._runner, utcnow()
                )
                if not recorded:
                    return
        await self._actions.end_action(
            action.id, ActionStatus.COMPLETED, utcnow(), runner=self._runner
        )

    async def _beat(self, action_id: UUID) -> bool:
        """Say this runner is alive; False once it no longer holds the Running action."""
        return await self._actions.heartbeat_action(action_id, self._runner, utcnow())

    async def _act(self, action: ActionRecord, operation_id: UUID) -> tuple[Outcome, str | None]:
        """Act on one operation (unless this action already did: a crash came between
        its act and its record) and say how it went."""
        record = await self._operations.get(operation_id)
        if record is None:
            return Outcome.SKIPPED, f"Operation {operation_id} not found"
        if record.last_action_id == action.id:
            return Outcome.DONE, None
        try:
            if action.action is ActionKind.CANCEL:
                await self._commands.cancel(
                    operation_id, actor=action.created_by, action_id=action.id
                )
                return Outcome.DONE, None
            result = await self._retries.retry(
                operation_id,
                from_step=action.from_step,
                include_completed=action.include_completed,
                actor=action.created_by,
                action_id=action.id,
            )
        except (Conflict, BadRequest, NotFound) as exc:
            again = await self._operations.get(operation_id)
            if again is not None and again.last_action_id == action.id:
                return Outcome.DONE, None  # another runner of this action got there first
            return Outcome.SKIPPED, exc.message
        except Exception as exc:
            log.warning("Action %s failed on operation %s: %s", action.id, operation_id, exc)
            return Outcome.FAILED, f"{type(exc).__name__}: {exc}"[:500]
        if not result.rows_submitted:
            reasons = "; ".join(result.skipped_reasons)
            return Outcome.SKIPPED, "No rows to run again" + (f": {reasons}" if reasons else "")
        return Outcome.DONE, None
