"""Undoing a finished operation: what an undo would do (the preview), and the undo
operation that does it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.engine.undo_plan import undo_plan
from bulkops.errors import Conflict, NotFound, TooManyRequests
from bulkops.service.ports import WorkQueue
from bulkops.service.submission import ACTIVE_LIMIT_RETRY_AFTER
from bulkops.storage.lifecycle import operation_event
from bulkops.storage.ports import OperationStore, RowStore
from bulkops.storage.records import (
    ActiveLimit,
    LimitReached,
    OperationRecord,
    RowRecord,
    UndoRefused,
)
from bulkops.storage.states import EventType, OperationStatus, RowState

ANONYMOUS = "anonymous"
# Rows of the undone operation that are not Completed are read (few, by the state index);
# Completed rows are counted.
_NOT_COMPLETED = (
    RowState.FAILED,
    RowState.PENDING,
    RowState.RUNNING,
    RowState.WAITING_FOR_COMPLETION,
)


@dataclass(frozen=True, slots=True)
class UndoPreview:
    """What an undo would do: the rows it would run, and their row-steps to undo (a row
    of a row or batch operation counts one step)."""

    rows: int
    steps: int


class UndoService:
    """Previews and starts the undo of a finished operation."""

    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        rows: RowStore,
        work: WorkQueue,
        *,
        tenant_max_active: int | None = None,
    ) -> None:
        self._registry = registry
        self._operations = operations
        self._rows = rows
        self._work = work
        self._limit = ActiveLimit(tenant_max_active) if tenant_max_active else None

    async def preview(self, operation_id: UUID) -> UndoPreview:
        """The rows and row-steps an undo of the operation would undo.

        Raises:
            NotFound: unknown operation.
            Conflict: it cannot be undone (the reason says why).
        """
        record, definition = await self._checked(operation_id)
        return await self._count(record, definition)

    async def undo(self, operation_id: UUID, created_by: str | None = None) -> OperationRecord:
        """Create and queue the undo operation of a finished operation: it runs the undos
        of the steps each row completed, in reverse step order, with the row's data as it
        was run. The undo operation keeps the original's tenant, metadata, notifications
        and priority.

        Raises:
            NotFound: unknown operation.
            Conflict: not in a final status, no undo defined, already undone (naming the
                undo), itself an undo or a dry run.
            TooManyRequests: the tenant already has its most active operations.
        """
        original, definition = await self._checked(operation_id)
        counted = await self._count(original, definition)
        now = utcnow()
        record = OperationRecord(
            id=uuid.uuid4(),
            operation_name=definition.name,
            status=OperationStatus.PENDING,
            created_by=(created_by or "").strip() or ANONYMOUS,
            created_at=now,
            source=original.source,
            file_id=original.file_id,
            file_name=original.file_name,
            file_size=original.file_size,
            file_format=original.file_format,
            metadata=original.metadata,
            notifications=original.notifications,
            column_map=original.column_map,
            schema_version=original.schema_version,
            total_rows=counted.rows,
            tenant=original.tenant,
            sheet=original.sheet,
            priority=original.priority,
            undo_of=original.id,
        )
        message = (
            f"Created by {record.created_by} to undo operation {original.id}: "
            f"{counted.rows} rows, {counted.steps} steps"
        )
        event = operation_event(record, EventType.CREATED, message, now, actor=record.created_by)
        refused = await self._operations.add_undo(record, [event], limit=self._limit)
        if isinstance(refused, LimitReached):
            owner = (
                f"Tenant {record.tenant!r}"
                if record.tenant is not None
                else f"Creator {record.created_by!r}"
            )
            most = self._limit.most if self._limit else refused.active
            raise TooManyRequests(
                f"{owner} already has {refused.active} operations Pending, Running or "
                f"Retrying, the most allowed (BULKOPS_TENANT_MAX_ACTIVE={most}); try again "
                "when one ends",
                retry_after=ACTIVE_LIMIT_RETRY_AFTER,
                limit=most,
                active=refused.active,
            )
        if isinstance(refused, UndoRefused):
            if refused.original is None:
                raise NotFound(f"Operation {operation_id} not found")
            raise _conflict(refused.original, _refusal(refused.original, definition))
        self._work.enqueue(record.id)
        return record

    async def _checked(self, operation_id: UUID) -> tuple[OperationRecord, OperationDefinition]:
        record = await self._operations.get(operation_id)
        if record is None:
            raise NotFound(f"Operation {operation_id} not found")
        definition = self._registry.get(record.operation_name)
        reason = _refusal(record, definition)
        if reason is not None:
            raise _conflict(record, reason)
        assert definition is not None  # _refusal names an unregistered operation
        return record, definition

    async def _count(self, record: OperationRecord, definition: OperationDefinition) -> UndoPreview:
        completed = (await self._operations.counts(record.id)).completed
        full = len(undo_plan(definition, _COMPLETED_ROW))
        rows, steps = (completed, completed * full) if full else (0, 0)
        if definition.is_step_based:  # rows stopped part way may have undoable steps
            async for row in self._rows.iterate(record.id, batch_size=5000, states=_NOT_COMPLETED):
                plan = len(undo_plan(definition, row))
                rows, steps = rows + (plan > 0), steps + plan
        return UndoPreview(rows, steps)


def _conflict(record: OperationRecord, reason: str | None) -> Conflict:
    """The 409 of a refused undo: ``reason``, and ``undoneBy`` when it was undone."""
    reason = reason or "The operation changed meanwhile; try again"
    extra = {} if record.undone_by is None else {"undoneBy": str(record.undone_by)}
    return Conflict(f"Cannot undo operation: {reason}", reason=reason, **extra)


def _refusal(record: OperationRecord, definition: OperationDefinition | None) -> str | None:
    """Why the operation cannot be undone now, or None."""
    if record.undone_by is not None:
        return f"Operation {record.id} was already undone by operation {record.undone_by}"
    if record.undo_of is not None:
        return f"Operation {record.id} undoes operation {record.undo_of}: it cannot be undone"
    if not record.status.is_terminal:
        return (
            f"Operation is {record.status.value}; only a finished operation (Completed, "
            "CompletedWithErrors, Failed or Cancelled) can be undone"
        )
    if definition is None:
        return f"Operation {record.operation_name!r} is not registered here"
    if not definition.undoable:
        how = "@undo_step for a step" if definition.is_step_based else "undo_row"
        return f"Operation {definition.name!r} defines no undo ({how})"
    if record.dry_run:
        return "A dry run ran nothing: there is nothing to undo"
    return None


# Stands for a Completed row in ``undo_plan`` (every step completed).
_COMPLETED_ROW = RowRecord(operation_id=UUID(int=0), row_number=0, state=RowState.COMPLETED)
