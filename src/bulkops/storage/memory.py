"""In-memory stores for one process: tests, demos and ``memory://`` deployments.

Every method runs without awaiting, so each is atomic on the event loop and no locks are
needed. Records are copied on the way in and out: callers never hold the stored objects.
"""

from __future__ import annotations

import builtins
from bisect import bisect_right, insort
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from copy import deepcopy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from bulkops.clock import utcnow
from bulkops.errors import StorageError
from bulkops.storage import lifecycle
from bulkops.storage.lifecycle import HELD_STATUSES, OperationChange, RowCounts
from bulkops.storage.records import (
    ActiveLimit,
    ChunkRecord,
    CompletedSpan,
    DeliveryRecord,
    EventRecord,
    Fence,
    IdempotencyKey,
    KeyInUse,
    LimitReached,
    OperationQuery,
    OperationRecord,
    Page,
    ProgressDelta,
    ReportValues,
    RetryRequest,
    RetrySnapshot,
    RetryStart,
    RowOutcome,
    RowQuery,
    RowRecord,
    RowWrite,
    SavedMapping,
    UndoRefused,
    WaitOutcome,
    report_values,
)
from bulkops.storage.states import ChunkState, DeliveryState, OperationStatus, RowState

if TYPE_CHECKING:
    from bulkops.storage.ports import (
        ChunkStore,
        EventStore,
        OperationStore,
        RateLimitStore,
        RetryStore,
        RowStore,
    )

_RUNNING = OperationStatus.RUNNING
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _copy_operation(record: OperationRecord) -> OperationRecord:
    return replace(
        record, metadata=deepcopy(record.metadata), notifications=deepcopy(record.notifications)
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
        and (query.tenant is None or record.tenant == query.tenant)
        and (query.file_sha256 is None or record.file_sha256 == query.file_sha256)
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


_ACTIVE = frozenset({OperationStatus.PENDING, _RUNNING, OperationStatus.RETRYING})


def _same_tenant(record: OperationRecord, new: OperationRecord) -> bool:
    """Whether ``record`` counts against the active limit of ``new``'s tenant: the same
    tenant, or without one the same creator."""
    if new.tenant is not None:
        return record.tenant == new.tenant
    return record.tenant is None and record.created_by == new.created_by


def _first_in_line(records: Iterable[OperationRecord]) -> builtins.list[OperationRecord]:
    """Highest priority first, then oldest first (the order work is claimed in)."""
    return sorted(records, key=lambda r: (-r.priority, r.created_at, r.id))


def _claimable(record: OperationRecord) -> bool:
    return record.status is OperationStatus.PENDING or (
        record.status is OperationStatus.RETRYING and record.worker_id is None
    )


class MemoryStore:
    """OperationStore, RowStore and RetryStore in one object, so a change, its rows and
    its events are written at once.

    Args:
        events: the feed that events of changes go to (default: a new one, readable as
            ``store.events``).
    """

    def __init__(self, events: MemoryEventStore | None = None) -> None:
        self.events = events if events is not None else MemoryEventStore()
        self._operations: dict[UUID, OperationRecord] = {}
        self._rows: dict[UUID, dict[int, RowRecord]] = {}
        # Row numbers of each operation in ascending order, for paging and keyset iteration.
        self._order: dict[UUID, builtins.list[int]] = {}
        self._history: dict[UUID, builtins.list[RetrySnapshot]] = {}
        self._keys: dict[tuple[str, str], tuple[UUID, str, datetime]] = {}
        self._chunks: dict[UUID, dict[int, ChunkRecord]] = {}
        self._starts: dict[str, builtins.list[datetime]] = {}
        self._deliveries: dict[UUID, DeliveryRecord] = {}
        self._fixes: dict[UUID, dict[int, dict[str, Any]]] = {}
        self._originals: dict[UUID, dict[int, dict[str, Any]]] = {}  # data before a first fix

    async def ping(self) -> None:
        """Always reachable."""

    async def add(
        self,
        record: OperationRecord,
        events: Sequence[EventRecord] = (),
        *,
        idempotency: IdempotencyKey | None = None,
        limit: ActiveLimit | None = None,
    ) -> KeyInUse | LimitReached | None:
        """Insert a new operation record and its events, unless the idempotency key was
        used or the active limit refuses it (see ``OperationStore.add``); a duplicate id
        raises ``StorageError``."""
        if record.id in self._operations:
            raise StorageError(f"operation {record.id} already exists")
        if idempotency is not None:
            slot = (idempotency.principal, idempotency.key)
            used = self._keys.get(slot)
            if used is not None and used[2] >= idempotency.expires_before:
                return KeyInUse(used[0], used[1])
        if limit is not None:
            active = sum(
                1
                for other in self._operations.values()
                if other.status in _ACTIVE and _same_tenant(other, record)
            )
            if active >= limit.most:
                return LimitReached(active)
        if idempotency is not None:
            self._keys[(idempotency.principal, idempotency.key)] = (
                record.id,
                idempotency.fingerprint,
                record.created_at,
            )
        self._operations[record.id] = _copy_operation(record)
        self._rows[record.id] = {}
        self._order[record.id] = []
        self.events.append_now(events)
        return None

    async def key_in_use(self, key: IdempotencyKey) -> KeyInUse | None:
        """The principal's unexpired use of ``key`` (see ``OperationStore.key_in_use``)."""
        used = self._keys.get((key.principal, key.key))
        if used is None or used[2] < key.expires_before:
            return None
        return KeyInUse(used[0], used[1])

    async def add_undo(
        self,
        record: OperationRecord,
        events: Sequence[EventRecord] = (),
        *,
        limit: ActiveLimit | None = None,
    ) -> UndoRefused | LimitReached | None:
        """Insert the undo operation ``record`` and name it on the operation it undoes (see
        ``OperationStore.add_undo``)."""
        if record.undo_of is None:
            raise ValueError("an undo operation names the operation it undoes (undo_of)")
        original = self._operations.get(record.undo_of)
        if original is None or original.undone_by is not None or not original.status.is_terminal:
            return UndoRefused(None if original is None else _copy_operation(original))
        refused = await self.add(record, events, limit=limit)
        if isinstance(refused, LimitReached):
            return refused
        self._operations[original.id] = replace(original, undone_by=record.id)
        return None

    async def acquire(self, key: str, limit: int, period: float) -> float:
        """Record a rate-limited start when the window has room; else the seconds to wait."""
        now = utcnow()
        window = now - timedelta(seconds=period)
        starts = [moment for moment in self._starts.get(key, []) if moment > window]
        self._starts[key] = starts
        if len(starts) < limit:
            starts.append(now)
            return 0.0
        return max((starts[0] - window).total_seconds(), 0.001)

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
        """Up to ``limit`` Pending operations and unheld Retrying ones, highest priority
        first, then oldest first."""
        waiting = (r for r in self._operations.values() if _claimable(r))
        return [_copy_operation(r) for r in _first_in_line(waiting)[: max(limit, 0)]]

    async def status_counts(self, tenant: str | None = None) -> dict[OperationStatus, int]:
        """Operations per status; with ``tenant``, that tenant's."""
        counts: dict[OperationStatus, int] = {}
        for record in self._operations.values():
            if tenant is not None and record.tenant != tenant:
                continue
            counts[record.status] = counts.get(record.status, 0) + 1
        return counts

    async def abandoned(self, stale_before: datetime, limit: int) -> Sequence[OperationRecord]:
        """Held operations whose heartbeat is older than ``stale_before``."""
        found = [
            r
            for r in self._operations.values()
            if r.status in HELD_STATUSES
            and r.worker_id is not None
            and (r.heartbeat_at or _EPOCH) < stale_before
        ]
        found.sort(key=lambda r: (r.heartbeat_at or _EPOCH, r.id))
        return [_copy_operation(r) for r in found[: max(limit, 0)]]

    async def running(self) -> Sequence[OperationRecord]:
        """Every Running operation, oldest first."""
        found = (r for r in self._operations.values() if r.status is _RUNNING)
        return [_copy_operation(r) for r in _oldest_first(found)]

    async def apply(self, change: OperationChange) -> OperationRecord | None:
        """Persist a change and its events when the token still matches."""
        record = self._operations.get(change.operation_id)
        if record is None or record.version != change.expected_version:
            return None
        self.events.append_now(change.events)
        self._deliveries.update((d.id, d) for d in change.deliveries)
        return self._put(replace(record, **change.values))

    async def counts(self, operation_id: UUID) -> RowCounts:
        """Completed and Failed rows of the operation."""
        rows = self._rows.get(operation_id, {}).values()
        return RowCounts(
            completed=sum(1 for row in rows if row.state is RowState.COMPLETED),
            failed=sum(1 for row in rows if row.state is RowState.FAILED),
        )

    async def failed_rows(self, operation_id: UUID) -> int:
        """Failed rows of the operation."""
        return (await self.counts(operation_id)).failed

    async def set_total_rows(self, operation_id: UUID, total_rows: int) -> None:
        """Record how many data rows the file holds (unknown ids are ignored)."""
        record = self._operations.get(operation_id)
        if record is not None and not record.status.is_terminal:
            self._operations[operation_id] = replace(record, total_rows=total_rows)

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        """Renew ``heartbeat_at`` of the held operations this worker holds."""
        for operation_id in set(operation_ids):
            record = self._operations.get(operation_id)
            if record and record.worker_id == worker_id and record.status in HELD_STATUSES:
                self._operations[operation_id] = replace(record, heartbeat_at=now)

    async def save(
        self,
        operation_id: UUID,
        rows: Sequence[RowRecord],
        delta: ProgressDelta,
        events: Sequence[EventRecord] = (),
        *,
        fence: Fence | None = None,
        completed: Sequence[CompletedSpan] = (),
    ) -> OperationStatus | None:
        """Upsert row records and completed spans, add ``delta`` to the counters and record
        ``events``.

        Returns the operation's status, or None (nothing written) when it is unknown or
        not held as ``fence`` says.
        """
        write = RowWrite(operation_id, rows, delta, events, fence, completed)
        return (await self.save_many([write]))[0]

    async def save_many(self, writes: Sequence[RowWrite]) -> builtins.list[OperationStatus | None]:
        """Every write as ``save`` does it, in order; one whose operation is unknown or not
        held as its fence says writes nothing and gets None."""
        for write in writes:
            write.check()
        return [self._save_one(write) for write in writes]

    def _save_one(self, write: RowWrite) -> OperationStatus | None:
        operation_id = write.operation_id
        record = self._operations.get(operation_id)
        if record is None:
            return None
        if record.status.is_terminal:  # final means final, until a retry's new round
            return record.status
        if not self._holds(record, write.fence):
            return None
        stored, order = self._rows[operation_id], self._order[operation_id]
        plain = (
            RowRecord(
                operation_id,
                number,
                RowState.COMPLETED,
                step_index=span.step_index,
                step_name=span.step_name,
                completed_at=span.completed_at,
            )
            for span in write.completed
            for number in range(span.first, span.last + 1)
        )
        for row in (*plain, *write.rows):
            if row.row_number not in stored:
                insort(order, row.row_number)
            stored[row.row_number] = _copy_row(row)
        delta = write.delta
        self._operations[operation_id] = replace(
            record,
            processed_rows=record.processed_rows + delta.processed,
            successful_rows=record.successful_rows + delta.successful,
            error_count=record.error_count + delta.failed,
        )
        self.events.append_now(write.events)
        return record.status

    def _holds(self, record: OperationRecord, fence: Fence | None) -> bool:
        if fence is None:
            return True
        if fence.chunk is None:
            return record.worker_id == fence.worker_id
        chunk = self._chunks.get(record.id, {}).get(fence.chunk)
        return (
            chunk is not None
            and chunk.state is ChunkState.RUNNING
            and chunk.worker_id == fence.worker_id
        )

    async def claim_deliveries(
        self, claimer: str, now: datetime, lease_until: datetime, limit: int
    ) -> Sequence[DeliveryRecord]:
        """Claim due Pending deliveries nobody holds, oldest first."""
        due = [
            d
            for d in self._deliveries.values()
            if d.state is DeliveryState.PENDING
            and (d.next_attempt_at is None or d.next_attempt_at <= now)
            and (d.claimed_until is None or d.claimed_until < now)
        ]
        due.sort(key=lambda d: (d.next_attempt_at or _EPOCH, str(d.id)))
        claimed = [
            replace(d, claimed_by=claimer, claimed_until=lease_until) for d in due[: max(limit, 0)]
        ]
        self._deliveries.update((d.id, d) for d in claimed)
        return claimed

    async def record_attempt(
        self,
        delivery_id: UUID,
        claimer: str,
        *,
        state: DeliveryState,
        now: datetime,
        status_code: int | None = None,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        """Record an attempt of a held delivery and release it."""
        found = self._deliveries.get(delivery_id)
        if found is None or found.claimed_by != claimer or found.state is not DeliveryState.PENDING:
            return False
        self._deliveries[delivery_id] = replace(
            found,
            state=state,
            attempts=found.attempts + 1,
            last_status_code=status_code,
            last_error=error,
            next_attempt_at=next_attempt_at,
            delivered_at=now if state is DeliveryState.DELIVERED else None,
            claimed_by=None,
            claimed_until=None,
        )
        return True

    async def deliveries(self, operation_id: UUID) -> Sequence[DeliveryRecord]:
        """Every delivery of an operation, oldest first."""
        found = [d for d in self._deliveries.values() if d.operation_id == operation_id]
        return sorted(found, key=lambda d: (d.created_at, str(d.id)))

    async def split(
        self, change: OperationChange, chunks: Sequence[ChunkRecord]
    ) -> OperationRecord | None:
        """Apply the change and insert the chunks at once."""
        stored = await self.apply(change)
        if stored is not None:
            self._chunks[change.operation_id] = {chunk.index: chunk for chunk in chunks}
        return stored

    def _claimable_chunks(
        self,
        names: Collection[str],
        stale_before: datetime,
        alive: Collection[str] = (),
        alive_before: datetime | None = None,
    ) -> Iterator[ChunkRecord]:
        wanted = {name.casefold() for name in names}
        for operation in _first_in_line(self._operations.values()):
            if (
                operation.status is not _RUNNING
                or operation.operation_name.casefold() not in wanted
            ):
                continue
            for chunk in self._chunks.get(operation.id, {}).values():
                beat = chunk.heartbeat_at or _EPOCH
                stale = beat < stale_before and (
                    chunk.worker_id not in alive
                    or chunk.heartbeat_at is None
                    or (alive_before is not None and beat < alive_before)
                )
                if chunk.state is ChunkState.PENDING or (
                    chunk.state is ChunkState.RUNNING and stale
                ):
                    yield chunk

    async def claim_chunk(
        self,
        names: Collection[str],
        worker_id: str,
        now: datetime,
        stale_before: datetime,
        exclude: Collection[UUID] = (),
        among: Collection[UUID] | None = None,
        alive: Collection[str] = (),
        alive_before: datetime | None = None,
    ) -> ChunkRecord | None:
        """Claim a Pending (or abandoned) chunk of a Running operation named in ``names``
        (not in ``exclude``, in ``among`` when given)."""
        found = self._claimable_chunks(names, stale_before, alive, alive_before)
        chunk = next(
            (
                c
                for c in found
                if c.operation_id not in exclude and (among is None or c.operation_id in among)
            ),
            None,
        )
        if chunk is None:
            return None
        claimed = replace(
            chunk,
            state=ChunkState.RUNNING,
            worker_id=worker_id,
            heartbeat_at=now,
            version=chunk.version + 1,
            resume_count=chunk.resume_count + (chunk.state is ChunkState.RUNNING),
        )
        self._chunks[chunk.operation_id][chunk.index] = claimed
        return claimed

    async def chunk_work(
        self,
        names: Collection[str],
        stale_before: datetime,
        alive: Collection[str] = (),
        alive_before: datetime | None = None,
        exclude: Collection[UUID] = (),
    ) -> int:
        """How many chunks could be claimed now (of operations not in ``exclude``)."""
        found = self._claimable_chunks(names, stale_before, alive, alive_before)
        return sum(1 for chunk in found if chunk.operation_id not in exclude)

    async def get_chunk(self, operation_id: UUID, index: int) -> ChunkRecord | None:
        """One chunk, or None."""
        return self._chunks.get(operation_id, {}).get(index)

    async def hand_back_stale_chunks(
        self, worker_id: str, stale_before: datetime, keep: Collection[tuple[UUID, int]] = ()
    ) -> Sequence[tuple[UUID, int]]:
        """Hand back the Running chunks ``worker_id`` holds with a void or older heartbeat,
        but those in ``keep``."""
        handed: list[tuple[UUID, int]] = []
        for operation_id, parts in self._chunks.items():
            for index, chunk in parts.items():
                if (
                    chunk.state is ChunkState.RUNNING
                    and chunk.worker_id == worker_id
                    and (chunk.heartbeat_at is None or chunk.heartbeat_at < stale_before)
                    and (operation_id, index) not in keep
                ):
                    parts[index] = replace(
                        chunk,
                        state=ChunkState.PENDING,
                        worker_id=None,
                        heartbeat_at=None,
                        version=chunk.version + 1,
                    )
                    handed.append((operation_id, index))
        return handed

    async def heartbeat_chunks(
        self, held: Collection[tuple[UUID, int]], worker_id: str, now: datetime
    ) -> set[tuple[UUID, int]]:
        """Renew the heartbeat of the chunks ``worker_id`` still holds among ``held``."""
        beaten: set[tuple[UUID, int]] = set()
        for operation_id, index in held:
            chunk = self._chunks.get(operation_id, {}).get(index)
            if chunk is None or chunk.state is not ChunkState.RUNNING:
                continue
            if chunk.worker_id != worker_id:
                continue
            self._chunks[operation_id][index] = replace(chunk, heartbeat_at=now)
            beaten.add((operation_id, index))
        return beaten

    async def end_chunk(
        self, operation_id: UUID, index: int, worker_id: str, *, done: bool
    ) -> int | None:
        """Mark a held chunk Done, or hand it back; returns the chunks not Done."""
        chunks = self._chunks.get(operation_id, {})
        chunk = chunks.get(index)
        if chunk is None or chunk.state is not ChunkState.RUNNING or chunk.worker_id != worker_id:
            return None
        state = ChunkState.DONE if done else ChunkState.PENDING
        chunks[index] = replace(
            chunk, state=state, worker_id=None, heartbeat_at=None, version=chunk.version + 1
        )
        return sum(1 for c in chunks.values() if c.state is not ChunkState.DONE)

    async def finished_splits(self) -> Sequence[UUID]:
        """Running operations whose chunks are all Done."""
        return [
            operation_id
            for operation_id, chunks in self._chunks.items()
            if chunks
            and all(c.state is ChunkState.DONE for c in chunks.values())
            and self._operations[operation_id].status is _RUNNING
        ]

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number."""
        _check_paging(query.page, query.page_size)
        stored = self._rows.get(query.operation_id, {})
        numbers = self._order.get(query.operation_id, [])
        found = [stored[n] for n in numbers if _matches_row(stored[n], query)]
        if query.after is not None:
            listed = [row for row in found if row.row_number > query.after]
            start = 0
        else:
            listed, start = found, (query.page - 1) * query.page_size
        items = [_copy_row(row) for row in listed[start : start + query.page_size]]
        more = len(listed) > start + query.page_size
        return Page(
            items=items,
            total_count=len(found),
            page=query.page,
            page_size=query.page_size,
            next_after=items[-1].row_number if more else None,
            keyset=query.after is not None,
        )

    async def iterate(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
        after: int = 0,
    ) -> AsyncIterator[RowRecord]:
        """Every row record above ``after`` (or those in ``states``) by row number, in
        keyset batches."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        last: int | None = after
        while True:
            stored = self._rows.get(operation_id, {})
            numbers = self._order.get(operation_id, [])
            start = 0 if last is None else bisect_right(numbers, last)
            batch: builtins.list[RowRecord] = []
            for number in numbers[start:]:
                if len(batch) >= batch_size:
                    break
                last = number
                if states is None or stored[number].state in states:
                    batch.append(_copy_row(stored[number]))
            for row in batch:
                yield row
            if len(batch) < batch_size:
                return

    async def report_batches(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
    ) -> AsyncIterator[builtins.list[ReportValues]]:
        """The report values of ``iterate``'s rows, in batches."""
        batch: builtins.list[ReportValues] = []
        async for row in self.iterate(operation_id, batch_size=batch_size, states=states):
            batch.append(report_values(row))
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    async def outcome_batches(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
        after: int = 0,
    ) -> AsyncIterator[builtins.list[RowOutcome]]:
        """The row outcomes of ``iterate``'s rows, in batches."""
        batch: builtins.list[RowOutcome] = []
        rows = self.iterate(operation_id, batch_size=batch_size, states=states, after=after)
        async for row in rows:
            outcome = RowOutcome(row.row_number, row.state, row.row_id, row.row_data, row.steps)
            batch.append(outcome)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    async def fix_row(
        self,
        operation_id: UUID,
        row_number: int,
        row_data: dict[str, Any],
        now: datetime,
        events: Sequence[EventRecord] = (),
    ) -> RowRecord | None:
        """Replace the data of a Failed row and mark it fixed; None when not Failed."""
        row = self._rows.get(operation_id, {}).get(row_number)
        if row is None or row.state is not RowState.FAILED:
            return None
        originals = self._originals.setdefault(operation_id, {})
        if row_number not in originals and row_number not in self._fixes.get(operation_id, {}):
            originals[row_number] = deepcopy(row.row_data or {})
        self.events.append_now(events)
        row.row_data = deepcopy(row_data)
        self._fixes.setdefault(operation_id, {})[row_number] = deepcopy(row_data)
        return _copy_row(row)

    async def fixes(
        self,
        operation_id: UUID,
        *,
        row_numbers: Collection[int] | None = None,
        failed_only: bool = False,
    ) -> dict[int, dict[str, Any]]:
        """The data of the operation's fixed rows by row number."""
        fixed = self._fixes.get(operation_id, {})
        rows = self._rows.get(operation_id, {})
        wanted = fixed.keys() if row_numbers is None else set(row_numbers) & fixed.keys()
        return {
            number: deepcopy(fixed[number])
            for number in sorted(wanted)
            if not failed_only
            or ((row := rows.get(number)) is not None and row.state is RowState.FAILED)
        }

    async def originals(
        self, operation_id: UUID, row_numbers: Collection[int]
    ) -> dict[int, dict[str, Any]]:
        """The data before their first fix of the fixed rows among ``row_numbers``."""
        kept = self._originals.get(operation_id, {})
        return {n: deepcopy(kept[n]) for n in sorted(set(row_numbers)) if n in kept}

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
        record = self._operations.get(operation_id)
        if record is not None and record.status.is_terminal:
            return None  # final means final: its waiting rows wait on
        stored = self._rows.get(operation_id, {})
        row = stored.get(row_number)
        if (
            row is None
            or row.state is not RowState.WAITING_FOR_COMPLETION
            or row.signal_key != signal_key
        ):
            return None
        stored[row_number] = lifecycle.resolve_wait(row, outcome)
        return _copy_row(stored[row_number])

    async def resolve_first_waiting(
        self, operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
    ) -> RowRecord | None:
        """End the wait of the first row waiting under the key prefix."""
        row = await self.find_waiting(operation_id, key_prefix)
        if row is None:
            return None
        return await self.resolve_wait(operation_id, row.row_number, row.signal_key, outcome(row))

    async def begin_retry(self, request: RetryRequest, now: datetime) -> RetryStart | None:
        """Snapshot, reset the qualifying rows and move the operation to Retrying, at once."""
        record = self._operations.get(request.operation_id)
        if (
            record is None
            or record.status not in lifecycle.retry_sources(request)
            or record.version != request.expected_version
        ):
            return None
        stored = self._rows[request.operation_id]
        fixed = self._fixes.get(request.operation_id, {})
        wanted = None if request.row_numbers is None else set(request.row_numbers)
        chosen = [
            row
            for number, row in sorted(stored.items())
            if lifecycle.qualifies(request, row, number in fixed)
            and (wanted is None or number in wanted)
        ]
        if not chosen:
            return RetryStart(_copy_operation(record), 0)
        history = self._history.setdefault(request.operation_id, [])
        failed = 0
        for row in chosen:
            failed += row.state is RowState.FAILED
            history.append(lifecycle.retry_snapshot(row))
            stored[row.row_number] = lifecycle.reset_row(request, row)
        change = lifecycle.retry_round(record, request, now, failed, len(chosen) - failed)
        self.events.append_now(change.events)
        self._deliveries.update((d.id, d) for d in change.deliveries)
        return RetryStart(self._put(replace(record, **change.values)), len(chosen))

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
        self.append_now(events)

    def append_now(self, events: Sequence[EventRecord]) -> None:
        """``append`` without awaiting, so a store can record events atomically with the
        change that caused them."""
        for event in events:
            self._events.append(replace(event, sequence=self._next_sequence))
            self._next_sequence += 1

    async def read(
        self,
        *,
        after: int | None,
        limit: int,
        operation_id: UUID | None = None,
        tenant: str | None = None,
        actor: str | None = None,
    ) -> Sequence[EventRecord]:
        """Events oldest first: those above ``after``, or the newest ``limit`` without it."""
        if limit < 1:
            return []
        # Walk back from the newest: feed readers poll for the tail, so this stays short.
        newest_first: builtins.list[EventRecord] = []
        for event in reversed(self._events):
            if after is not None and event.sequence <= after:
                break
            if (
                (operation_id is None or event.operation_id == operation_id)
                and (tenant is None or event.tenant == tenant)
                and (actor is None or event.actor == actor)
            ):
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
    ) -> tuple[OperationStore, RowStore, RetryStore, RateLimitStore, ChunkStore, EventStore]:
        # mypy proves here that the memory stores satisfy the Protocols.
        return store, store, store, store, store, events


class MemoryMappingStore:
    """Saved column mappings in memory (a ``MappingStore``)."""

    def __init__(self) -> None:
        self._mappings: dict[tuple[str | None, str, str], SavedMapping] = {}

    async def save_mapping(self, mapping: SavedMapping) -> None:
        """Store ``mapping``, replacing the one of the same tenant, operation and name."""
        key = (mapping.tenant, mapping.operation_name, mapping.name)
        self._mappings[key] = replace(mapping, column_map=dict(mapping.column_map))

    async def get_mapping(
        self, tenant: str | None, operation_name: str, name: str
    ) -> SavedMapping | None:
        """The mapping of that tenant, operation and name, or None."""
        found = self._mappings.get((tenant, operation_name, name))
        return None if found is None else replace(found, column_map=dict(found.column_map))

    async def list_mappings(
        self, tenant: str | None, operation_name: str
    ) -> builtins.list[SavedMapping]:
        """The tenant's mappings of the operation, by name."""
        found = [
            replace(m, column_map=dict(m.column_map))
            for (owner, operation, _), m in self._mappings.items()
            if owner == tenant and operation == operation_name
        ]
        return sorted(found, key=lambda m: m.name)

    async def delete_mapping(self, tenant: str | None, operation_name: str, name: str) -> bool:
        """Remove the mapping; False when there was none."""
        return self._mappings.pop((tenant, operation_name, name), None) is not None
