"""In-memory stores for one process: tests, demos and ``memory://`` deployments.

Every method runs without awaiting, so each is atomic on the event loop and no locks are
needed. Records are copied on the way in and out: callers never hold the stored objects.
"""

from __future__ import annotations

import builtins
from bisect import bisect_right, insort
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from copy import deepcopy
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from bulkops.errors import StorageError
from bulkops.storage.records import (
    EventRecord,
    OperationQuery,
    OperationRecord,
    Page,
    ProgressDelta,
    RetryRequest,
    RetrySnapshot,
    RetryStart,
    RowQuery,
    RowRecord,
    WaitOutcome,
    resolve_wait,
)
from bulkops.storage.states import (
    CLAIMABLE_STATUSES,
    OperationStatus,
    RowState,
    allowed_sources,
)

if TYPE_CHECKING:
    from bulkops.storage.ports import EventStore, OperationStore, RetryStore, RowStore

_RUNNING = OperationStatus.RUNNING
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _copy_operation(record: OperationRecord) -> OperationRecord:
    return replace(
        record, metadata=deepcopy(record.metadata), notifications=deepcopy(record.notifications)
    )


def _snapshot(row: RowRecord) -> RetrySnapshot:
    return RetrySnapshot(
        operation_id=row.operation_id,
        row_number=row.row_number,
        attempt=row.retry_attempt,
        step_index=row.step_index,
        step_name=row.step_name,
        error_type=row.error_type,
        error_message=row.error_message,
        failed_at=row.completed_at,
    )


def _copy_row(row: RowRecord) -> RowRecord:
    return replace(
        row,
        row_data=None if row.row_data is None else deepcopy(row.row_data),
        steps=[replace(step) for step in row.steps],
    )


def _check_paging(page: int, page_size: int) -> None:
    if page < 1 or page_size < 1:
        raise ValueError(f"page and page_size must be at least 1, got {page} and {page_size}")


def _matches_operation(record: OperationRecord, query: OperationQuery) -> bool:
    name, creator = query.operation_name, query.created_by
    return (
        (name is None or record.operation_name.lower() == name.lower())
        and (creator is None or record.created_by.lower() == creator.lower())
        and (query.status is None or record.status is query.status)
        and (query.created_from is None or record.created_at >= query.created_from)
        and (query.created_to is None or record.created_at <= query.created_to)
    )


def _matches_row(row: RowRecord, query: RowQuery) -> bool:
    return (
        (not query.failed_only or row.state is RowState.FAILED)
        and (query.state is None or row.state is query.state)
        and (query.error_type is None or row.error_type is query.error_type)
        and (query.row_number is None or row.row_number == query.row_number)
        and (query.step_name is None or row.step_name == query.step_name)
    )


def _oldest_first(records: Iterable[OperationRecord]) -> builtins.list[OperationRecord]:
    return sorted(records, key=lambda r: (r.created_at, r.id))


class MemoryStore:
    """OperationStore and RowStore in one object, so ``save`` updates counters atomically."""

    def __init__(self) -> None:
        self._operations: dict[UUID, OperationRecord] = {}
        self._rows: dict[UUID, dict[int, RowRecord]] = {}
        # Row numbers of each operation in ascending order, for paging and keyset iteration.
        self._order: dict[UUID, builtins.list[int]] = {}
        self._history: dict[UUID, builtins.list[RetrySnapshot]] = {}

    async def ping(self) -> None:
        """Always reachable."""

    async def add(self, record: OperationRecord) -> None:
        """Insert a new operation record; a duplicate id raises ``StorageError``."""
        if record.id in self._operations:
            raise StorageError(f"operation {record.id} already exists")
        self._operations[record.id] = _copy_operation(record)
        self._rows[record.id] = {}
        self._order[record.id] = []

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        """The operation record, or None when unknown."""
        record = self._operations.get(operation_id)
        return None if record is None else _copy_operation(record)

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One row record, or None when unknown."""
        row = self._rows.get(operation_id, {}).get(row_number)
        return None if row is None else _copy_row(row)

    async def list(self, query: OperationQuery) -> Page[OperationRecord]:
        """A page of matching records, newest ``created_at`` first, then by id."""
        _check_paging(query.page, query.page_size)
        found = [r for r in self._operations.values() if _matches_operation(r, query)]
        found.sort(key=lambda r: r.id)
        found.sort(key=lambda r: r.created_at, reverse=True)  # stable: ties stay by id
        start = (query.page - 1) * query.page_size
        items = [_copy_operation(r) for r in found[start : start + query.page_size]]
        return Page(items=items, total_count=len(found), page=query.page, page_size=query.page_size)

    async def claimable(self, limit: int) -> Sequence[OperationRecord]:
        """Up to ``limit`` Pending or Retrying operations, oldest first."""
        waiting = (r for r in self._operations.values() if r.status in CLAIMABLE_STATUSES)
        return [_copy_operation(r) for r in _oldest_first(waiting)[: max(limit, 0)]]

    async def claim(
        self, operation_id: UUID, version: int, worker_id: str, now: datetime
    ) -> OperationRecord | None:
        """Move a claimable operation whose token is ``version`` to Running."""
        record = self._operations.get(operation_id)
        if record is None or record.version != version or record.status not in CLAIMABLE_STATUSES:
            return None
        return self._put(
            replace(
                record,
                status=_RUNNING,
                version=record.version + 1,
                worker_id=worker_id,
                heartbeat_at=now,
                started_at=record.started_at if record.started_at is not None else now,
            )
        )

    async def transition(
        self,
        operation_id: UUID,
        target: OperationStatus,
        now: datetime,
        *,
        error_message: str | None = None,
        expected_version: int | None = None,
    ) -> OperationRecord | None:
        """Change the status when the transition table allows it from the current one."""
        record = self._operations.get(operation_id)
        if record is None or record.status not in allowed_sources(target):
            return None
        if expected_version is not None and record.version != expected_version:
            return None
        changes: dict[str, Any] = {"status": target, "version": record.version + 1}
        if target.is_terminal:
            changes["completed_at"] = now
        if target is OperationStatus.PENDING:
            changes.update(worker_id=None, heartbeat_at=None)
        if error_message is not None:
            changes["error_message"] = error_message
        return self._put(replace(record, **changes))

    async def set_total_rows(self, operation_id: UUID, total_rows: int) -> None:
        """Record how many data rows the file holds (unknown ids are ignored)."""
        record = self._operations.get(operation_id)
        if record is not None:
            self._operations[operation_id] = replace(record, total_rows=total_rows)

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        """Renew ``heartbeat_at`` of the Running operations this worker holds."""
        for operation_id in set(operation_ids):
            record = self._operations.get(operation_id)
            if record and record.worker_id == worker_id and record.status is _RUNNING:
                self._operations[operation_id] = replace(record, heartbeat_at=now)

    async def running(self) -> Sequence[OperationRecord]:
        """Every Running operation, oldest first."""
        found = (r for r in self._operations.values() if r.status is _RUNNING)
        return [_copy_operation(r) for r in _oldest_first(found)]

    async def recount(self, operation_id: UUID) -> OperationRecord | None:
        """Recompute processed, successful and error counters from the stored row states."""
        record = self._operations.get(operation_id)
        if record is None:
            return None
        rows = self._rows[operation_id].values()
        done = sum(1 for row in rows if row.state is RowState.COMPLETED)
        bad = sum(1 for row in rows if row.state is RowState.FAILED)
        return self._put(
            replace(record, processed_rows=done + bad, successful_rows=done, error_count=bad)
        )

    async def save(
        self, operation_id: UUID, rows: Sequence[RowRecord], delta: ProgressDelta
    ) -> OperationStatus | None:
        """Upsert row records and add ``delta`` to the counters.

        Returns the operation's status, or None (nothing written) when it is unknown.
        """
        if any(row.operation_id != operation_id for row in rows):
            raise ValueError(f"every saved row must belong to operation {operation_id}")
        record = self._operations.get(operation_id)
        if record is None:
            return None
        stored, order = self._rows[operation_id], self._order[operation_id]
        for row in rows:
            if row.row_number not in stored:
                insort(order, row.row_number)
            stored[row.row_number] = _copy_row(row)
        self._operations[operation_id] = replace(
            record,
            processed_rows=record.processed_rows + delta.processed,
            successful_rows=record.successful_rows + delta.successful,
            error_count=record.error_count + delta.failed,
        )
        return record.status

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number."""
        _check_paging(query.page, query.page_size)
        stored = self._rows.get(query.operation_id, {})
        numbers = self._order.get(query.operation_id, [])
        found = [stored[n] for n in numbers if _matches_row(stored[n], query)]
        start = (query.page - 1) * query.page_size
        items = [_copy_row(row) for row in found[start : start + query.page_size]]
        return Page(items=items, total_count=len(found), page=query.page, page_size=query.page_size)

    async def final_row_numbers(self, operation_id: UUID, after: int, limit: int) -> Sequence[int]:
        """Ascending row numbers above ``after`` whose state is Completed or Failed."""
        stored = self._rows.get(operation_id, {})
        numbers = self._order.get(operation_id, [])
        found: builtins.list[int] = []
        for number in numbers[bisect_right(numbers, after) :]:
            if len(found) >= limit:
                break
            if stored[number].state.is_final:
                found.append(number)
        return found

    async def iterate(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        state: RowState | None = None,
    ) -> AsyncIterator[RowRecord]:
        """Every row record (or those in ``state``) by row number, in keyset batches."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        last: int | None = None
        while True:
            stored = self._rows.get(operation_id, {})
            numbers = self._order.get(operation_id, [])
            start = 0 if last is None else bisect_right(numbers, last)
            batch: builtins.list[RowRecord] = []
            for number in numbers[start:]:
                if len(batch) >= batch_size:
                    break
                last = number
                if state is None or stored[number].state is state:
                    batch.append(_copy_row(stored[number]))
            for row in batch:
                yield row
            if len(batch) < batch_size:
                return

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The first waiting row (by waiting time, then row number) with that key prefix."""
        candidates = [
            row
            for row in self._rows.get(operation_id, {}).values()
            if row.state is RowState.WAITING_FOR_COMPLETION
            and row.signal_key == f"{key_prefix}{row.row_number}"
        ]
        if not candidates:
            return None
        first = min(candidates, key=lambda r: (r.waiting_since or _EPOCH, r.row_number))
        return _copy_row(first)

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """End a wait when the row still waits with that key; None otherwise."""
        stored = self._rows.get(operation_id, {})
        row = stored.get(row_number)
        if (
            row is None
            or row.state is not RowState.WAITING_FOR_COMPLETION
            or row.signal_key != signal_key
        ):
            return None
        stored[row_number] = resolve_wait(row, outcome)
        return _copy_row(stored[row_number])

    async def begin_retry(self, request: RetryRequest, now: datetime) -> RetryStart | None:
        """Snapshot, reset the qualifying rows and move the operation to Retrying, at once."""
        record = self._operations.get(request.operation_id)
        if (
            record is None
            or record.status is not OperationStatus.COMPLETED_WITH_ERRORS
            or record.version != request.expected_version
        ):
            return None
        stored = self._rows[request.operation_id]
        wanted = None if request.row_numbers is None else set(request.row_numbers)
        chosen = [
            row
            for number, row in sorted(stored.items())
            if row.state is RowState.FAILED
            and row.step_index in request.allowed_steps
            and (wanted is None or number in wanted)
        ]
        if not chosen:
            return RetryStart(_copy_operation(record), 0)
        history = self._history.setdefault(request.operation_id, [])
        for row in chosen:
            history.append(_snapshot(row))
            stored[row.row_number] = replace(
                row,
                state=RowState.PENDING,
                retry_attempt=row.retry_attempt + 1,
                error_type=None,
                error_message=None,
                completed_at=None,
            )
        updated = self._put(
            replace(
                record,
                status=OperationStatus.RETRYING,
                retry_count=record.retry_count + 1,
                version=record.version + 1,
                completed_at=None,
                error_message=None,
            )
        )
        return RetryStart(updated, len(chosen))

    async def history(
        self, operation_id: UUID, *, row_number: int | None, page: int, page_size: int
    ) -> Page[RetrySnapshot]:
        """Retry history entries by row number, then attempt."""
        _check_paging(page, page_size)
        entries = [
            entry
            for entry in self._history.get(operation_id, [])
            if row_number is None or entry.row_number == row_number
        ]
        entries.sort(key=lambda e: (e.row_number, e.attempt))
        start = (page - 1) * page_size
        return Page(entries[start : start + page_size], len(entries), page, page_size)

    def _put(self, record: OperationRecord) -> OperationRecord:
        self._operations[record.id] = record
        return _copy_operation(record)


class MemoryEventStore:
    """The event feed as a bounded in-memory tail.

    Sequences start at 1 in each process and keep increasing when old events are evicted
    or pruned.

    Args:
        max_events: how many of the newest events are kept.
    """

    def __init__(self, max_events: int = 10_000) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be at least 1, got {max_events}")
        self._events: deque[EventRecord] = deque(maxlen=max_events)
        self._next_sequence = 1

    async def append(self, events: Sequence[EventRecord]) -> None:
        """Record events, assigning their sequences in order (evicting the oldest)."""
        for event in events:
            self._events.append(replace(event, sequence=self._next_sequence))
            self._next_sequence += 1

    async def read(
        self, *, after: int | None, limit: int, operation_id: UUID | None = None
    ) -> Sequence[EventRecord]:
        """Events oldest first: those above ``after``, or the newest ``limit`` without it."""
        if limit < 1:
            return []
        # Walk back from the newest: feed readers poll for the tail, so this stays short.
        newest_first: builtins.list[EventRecord] = []
        for event in reversed(self._events):
            if after is not None and event.sequence <= after:
                break
            if operation_id is None or event.operation_id == operation_id:
                newest_first.append(event)
                if after is None and len(newest_first) == limit:
                    break
        newest_first.reverse()
        return newest_first[:limit]

    async def prune(self, before: datetime) -> int:
        """Delete events older than ``before``; return how many."""
        kept = [event for event in self._events if event.timestamp >= before]
        removed = len(self._events) - len(kept)
        self._events = deque(kept, maxlen=self._events.maxlen)
        return removed


if TYPE_CHECKING:

    def _implements_ports(
        store: MemoryStore, events: MemoryEventStore
    ) -> tuple[OperationStore, RowStore, RetryStore, EventStore]:
        # mypy proves here that the memory stores satisfy the Protocols.
        return store, store, store, events
