"""Storage contracts. Adapters (memory, SQL, object storage) implement these Protocols.

Every adapter passes the same contract suite (``tests/contract``). Timestamps going in and
coming out are timezone-aware UTC. Adapters translate their driver errors into
``bulkops.errors.StorageError``. The rules of every state change live in
``storage.lifecycle``; adapters persist changes and their events, in one transaction each.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from bulkops.storage.actions import ActionItem, ActionRecord, ActionStatus, Outcome
from bulkops.storage.lifecycle import OperationChange, RowCounts
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
    StoredFile,
    UndoRefused,
    WaitOutcome,
)
from bulkops.storage.states import DeliveryState, OperationStatus, RowState


class OperationStore(Protocol):
    """Operation records. Every status change arrives as a ``lifecycle.OperationChange``,
    persisted with its events in one transaction, so the feed never misses a transition."""

    async def ping(self) -> None:
        """Raise ``StorageError`` when the backend is unreachable."""

    async def add(
        self,
        record: OperationRecord,
        events: Sequence[EventRecord],
        *,
        idempotency: IdempotencyKey | None = None,
        limit: ActiveLimit | None = None,
    ) -> KeyInUse | LimitReached | None:
        """Insert a new operation record and its events (Created) in one transaction.

        With ``idempotency``: when the principal used the key at or after
        ``expires_before``, nothing is inserted and that earlier use is returned (of two
        concurrent adds with one key, exactly one inserts); an expired use is replaced.
        With ``limit``: when the record's tenant (its ``tenant``, else its creator among
        operations without one) already has ``limit.most`` operations Pending, Running or
        Retrying, nothing is inserted (nor the key recorded) and ``LimitReached`` is
        returned; adds for one tenant are decided one at a time across processes, so the
        limit holds under concurrency. A replayed key wins over the limit.
        Returns None when the record was inserted.
        """

    async def key_in_use(self, key: IdempotencyKey) -> KeyInUse | None:
        """The principal's unexpired use (at or after ``key.expires_before``) of ``key``,
        if any; nothing is recorded. Lets a create replay a key before refusing what the
        replayed request would be refused for now (a duplicate file)."""

    async def add_undo(
        self,
        record: OperationRecord,
        events: Sequence[EventRecord],
        *,
        limit: ActiveLimit | None = None,
    ) -> UndoRefused | LimitReached | None:
        """Insert the undo operation ``record`` (its ``undo_of`` names the operation it
        undoes) with its events, and set ``undone_by`` of that operation, in one
        transaction, when that operation is in a final status and not undone yet: of two
        concurrent undos of one operation exactly one inserts. Returns None when inserted;
        else nothing is inserted: ``UndoRefused`` with that operation as stored (its
        ``undone_by`` or status says why), or ``LimitReached`` when the active limit
        refuses it (as ``add``)."""

    async def status_counts(self, tenant: str | None = None) -> dict[OperationStatus, int]:
        """How many operations are in each status (statuses with none are left out); with
        ``tenant``, only that tenant's."""

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        """The record, or None when unknown."""

    async def list(self, query: OperationQuery) -> Page[OperationRecord]:
        """A page of records matching the query, newest ``created_at`` first, then by id."""

    async def claimable(self, limit: int) -> Sequence[OperationRecord]:
        """Up to ``limit`` operations a worker may claim, highest priority first, then
        oldest first: Pending ones, and Retrying ones nobody holds."""

    async def abandoned(self, stale_before: datetime, limit: int) -> Sequence[OperationRecord]:
        """Up to ``limit`` held operations (Running or Retrying, with a worker) whose
        heartbeat is older than ``stale_before``, oldest heartbeat first."""

    async def running(self) -> Sequence[OperationRecord]:
        """Every Running operation, oldest first."""

    async def apply(self, change: OperationChange) -> OperationRecord | None:
        """Persist a change: set ``change.values`` when the stored token is still
        ``change.expected_version``, and record ``change.events``, in one transaction.

        Returns the stored record after the change, or None (nothing written) when the
        operation is unknown or another writer moved it first.
        """

    async def counts(self, operation_id: UUID) -> RowCounts:
        """How many of the operation's stored rows are Completed and Failed."""

    async def failed_rows(self, operation_id: UUID) -> int:
        """How many of the operation's stored rows are Failed: ``counts().failed``, at the
        cost of the failed rows alone."""

    async def set_total_rows(self, operation_id: UUID, total_rows: int) -> None:
        """Record how many data rows the file holds (ignored once its status is final)."""

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        """Renew ``heartbeat_at`` of the held operations this worker holds."""


class RateLimitStore(Protocol):
    """Starts of rate-limited calls, shared by every process using the same storage."""

    async def acquire(self, key: str, limit: int, period: float) -> float:
        """Record a start under ``key`` when fewer than ``limit`` starts were recorded in
        the ``period`` seconds before now, and return 0; otherwise record nothing and return
        the seconds until the oldest of them leaves the window. Decisions for one key are
        serialised across processes, and "now" is read once the key is locked, so starts
        are recorded in the order they were decided."""


class ChunkStore(Protocol):
    """The row ranges of operations split for several workers (implemented by the same
    object as the operation store)."""

    async def split(
        self, change: OperationChange, chunks: Sequence[ChunkRecord]
    ) -> OperationRecord | None:
        """Apply ``change`` (the operation handed from its claimer to its chunks) and insert
        ``chunks``, in one transaction; None (nothing written) when the token moved."""

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
        """Claim one chunk of a Running operation whose name is in ``names`` (compared
        case-insensitively) and whose id is not in ``exclude`` (and is in ``among``, when
        given): a Pending one, or a Running one whose heartbeat is void or older than
        ``stale_before`` - older than ``alive_before`` too when its holder is in ``alive``
        (holders known alive: their chunks are not taken on the age of a heartbeat alone;
        ``alive_before`` None: never on its age). It becomes Running, held by
        ``worker_id`` (token incremented; ``resume_count`` too when it was taken from a
        stopped holder); a chunk of a higher-priority operation first, then of the oldest.
        Concurrent claimers never get the same chunk. None when there is
        none."""

    async def chunk_work(
        self,
        names: Collection[str],
        stale_before: datetime,
        alive: Collection[str] = (),
        alive_before: datetime | None = None,
        exclude: Collection[UUID] = (),
    ) -> int:
        """How many chunks ``claim_chunk`` could claim now (with the same ``alive`` and
        ``exclude``)."""

    async def get_chunk(self, operation_id: UUID, index: int) -> ChunkRecord | None:
        """One chunk, or None."""

    async def heartbeat_chunks(
        self, held: Collection[tuple[UUID, int]], worker_id: str, now: datetime
    ) -> set[tuple[UUID, int]]:
        """Renew the heartbeat of the chunks ``held`` (operation id, chunk index) that
        ``worker_id`` still holds, in one statement; returns those (the others it no
        longer holds)."""

    async def hand_back_stale_chunks(
        self, worker_id: str, stale_before: datetime, keep: Collection[tuple[UUID, int]] = ()
    ) -> Sequence[tuple[UUID, int]]:
        """Hand back to Pending the Running chunks ``worker_id`` holds whose heartbeat is
        void or older than ``stale_before``, except those in ``keep`` (operation id, chunk
        index); returns those handed back. The heartbeat is checked as each is changed: a
        chunk claimed again meanwhile (its heartbeat fresh) stays held."""

    async def end_chunk(
        self, operation_id: UUID, index: int, worker_id: str, *, done: bool
    ) -> int | None:
        """Mark a chunk Done (``done``) or hand it back to Pending, only while
        ``worker_id`` holds it; returns how many of the operation's chunks are not Done
        (counted in the same transaction, so exactly one worker sees the last chunk end),
        or None when it was not held."""

    async def finished_splits(self) -> Sequence[UUID]:
        """Running operations whose chunks are all Done (their last worker stopped before it
        could end the operation)."""


class DeliveryStore(Protocol):
    """The notification outbox (implemented by the same object as the operation store:
    deliveries are written with the changes that cause them)."""

    async def claim_deliveries(
        self, claimer: str, now: datetime, lease_until: datetime, limit: int
    ) -> Sequence[DeliveryRecord]:
        """Claim up to ``limit`` Pending deliveries that are due (``next_attempt_at`` at or
        before ``now``) and not claimed by a live claimer (``claimed_until`` passed),
        oldest first; each is claimed by ``claimer`` until ``lease_until``. Concurrent
        claimers never get the same delivery."""

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
        """Record one attempt of a delivery ``claimer`` holds: Delivered, Failed (given
        up), or Pending again with ``next_attempt_at``; the claim is released. False when
        ``claimer`` no longer holds it."""

    async def deliveries(self, operation_id: UUID) -> Sequence[DeliveryRecord]:
        """Every delivery of an operation, oldest first."""


class RowStore(Protocol):
    """Row records of operations."""

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
        """Upsert row records (by operation and row number) and the plain Completed rows of
        ``completed``, add ``delta`` to the operation's counters and record ``events``
        (RowFailed), in one transaction. ``delta`` counts every row, ``completed``'s too.

        With ``fence``, only while that worker holds the operation (or the fence's chunk of
        it): a worker that lost it (another resumed it) writes nothing. Returns the
        operation's status after the write, so a worker notices a cancellation at every
        flush; None when nothing was written (unknown operation, or not held).

        Final means final: an operation whose status is final (Completed,
        CompletedWithErrors, Failed, Cancelled) takes nothing (no row, counter or event)
        until a retry starts a new round; the write returns that final status, checked in
        the transaction that would have written, so rows finishing while a cancel takes
        effect are stored before the Cancelled status or not at all.
        """

    async def save_many(self, writes: Sequence[RowWrite]) -> list[OperationStatus | None]:
        """Every write as ``save`` does it, all in one transaction, each fenced on its own:
        a write whose fence is lost (or whose operation is unknown) writes nothing and gets
        None, one whose operation's status is final writes nothing and gets that status,
        and the others are written. Returns one status per write, in their order.
        Several writes may name one operation (chunks of it). Raises ValueError, writing
        nothing, when a write holds a row of another operation.
        """

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One row record, or None."""

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number."""

    def iterate(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
        after: int = 0,
    ) -> AsyncIterator[RowRecord]:
        """Every row record of an operation above row ``after`` (or those in ``states``)
        by row number, fetched in batches."""

    def report_batches(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
    ) -> AsyncIterator[list[ReportValues]]:
        """The ``report_values`` of every row record of an operation (or those in
        ``states``) by row number, a batch at a time: what ``iterate`` yields, without
        building a record per row."""

    def outcome_batches(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
        after: int = 0,
    ) -> AsyncIterator[list[RowOutcome]]:
        """What every row of an operation above row ``after`` (or those in ``states``)
        did, as ``RowOutcome`` by row number, a batch at a time: the fields of ``iterate``'s
        records an undo reads, without building a record per row."""

    async def fix_row(
        self,
        operation_id: UUID,
        row_number: int,
        row_data: dict[str, Any],
        now: datetime,
        events: Sequence[EventRecord] = (),
    ) -> RowRecord | None:
        """Replace the data of a Failed row and mark it fixed, in one transaction: its
        ``row_data`` becomes ``row_data`` and the fix (that data, at ``now``) is kept for
        ``fixes``, the row's data before its first fix for ``originals``, and ``events``
        (its RowFixed) are recorded. Returns the stored row after it; None, with nothing
        changed, when the row is not stored or not Failed."""

    async def fixes(
        self,
        operation_id: UUID,
        *,
        row_numbers: Collection[int] | None = None,
        failed_only: bool = False,
    ) -> dict[int, dict[str, Any]]:
        """The data of the operation's fixed rows by row number: every one, or those among
        ``row_numbers``; with ``failed_only`` only those whose row is Failed now."""

    async def originals(
        self, operation_id: UUID, row_numbers: Collection[int]
    ) -> dict[int, dict[str, Any]]:
        """The data before their first fix of those of ``row_numbers`` that were fixed in
        place (rows fixed before this was kept are left out), by row number."""

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The row that started waiting first (ties by row number) among the operation's
        WaitingForCompletion rows whose signal key is ``key_prefix`` + its row number."""

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """End a wait atomically: only when the row is still WaitingForCompletion with this
        signal key (None for polling steps). Applies ``lifecycle.resolve_wait`` and returns
        the stored result, or None when the row was not waiting (someone else ended it)."""

    async def resolve_first_waiting(
        self, operation_id: UUID, key_prefix: str, outcome: Callable[[RowRecord], WaitOutcome]
    ) -> RowRecord | None:
        """``find_waiting`` and ``resolve_wait`` in one transaction: end the wait of the row
        that started waiting first under ``key_prefix`` with ``outcome(row)``, and return
        the stored result; None when no row waits under it. Concurrent calls never end one
        row twice, and each ends a row when enough rows wait."""


class RetryStore(Protocol):
    """Retry rounds and their history (implemented by the same object as the row store)."""

    async def begin_retry(self, request: RetryRequest, now: datetime) -> RetryStart | None:
        """Start a retry round in one transaction.

        When the operation is CompletedWithErrors with token ``expected_version``: snapshot
        each qualifying row's error (see ``RetryRequest``: fixed Failed rows qualify at any
        step) into the history, reset those rows
        (``lifecycle.reset_for_retry``) and apply ``lifecycle.begin_retry`` with its event.
        When no row qualifies nothing changes and ``rows_reset`` is 0. Returns None when
        the operation is not CompletedWithErrors with that token (another writer got there
        first).
        """

    async def history(
        self, operation_id: UUID, *, row_number: int | None, page: int, page_size: int
    ) -> Page[RetrySnapshot]:
        """Retry history entries by row number, then attempt."""


class EventStore(Protocol):
    """The event feed. Sequences increase and are never reused."""

    async def append(self, events: Sequence[EventRecord]) -> None:
        """Record events; the store assigns their sequences in order."""

    async def read(
        self,
        *,
        after: int | None,
        limit: int,
        operation_id: UUID | None = None,
        tenant: str | None = None,
        actor: str | None = None,
    ) -> Sequence[EventRecord]:
        """Events oldest first.

        With ``after``: those with a sequence above it, at most ``limit``. Without: the newest
        ``limit`` events. ``operation_id`` restricts to one operation, ``tenant`` to the
        events of that tenant's operations, ``actor`` to the events that actor caused.
        """

    async def prune(self, before: datetime) -> int:
        """Delete events older than ``before``; return how many."""


class WakeUps(Protocol):
    """Prompt notices between processes sharing a database: new work, a recorded signal.

    Polling stays the fallback, so a lost notice only delays; an implementation that
    cannot deliver notices (SQLite, memory) does nothing.
    """

    async def announce_work(self) -> None:
        """Tell every listening process that work can be claimed (an operation is Pending
        or Retrying, or an operation was split into chunks)."""

    async def announce_signal(self, key: str) -> None:
        """Tell every listening process that the row waiting under the full signal ``key``
        was signalled."""

    async def listen(self, on_work: Callable[[], None], on_signal: Callable[[str], None]) -> None:
        """Call ``on_work`` and ``on_signal`` as notices arrive, until cancelled; reconnects
        after a lost connection. Returns at once when notices are not supported."""


class Liveness(Protocol):
    """Whether a worker holding work is alive, known beyond its heartbeat.

    A heartbeat only ages: a holder is given up ``BULKOPS_ABANDON_AFTER`` after its last
    one, however certain its death. Where storage can know a process is gone (PostgreSQL
    drops the session, and its locks, of a process that died; on one host a process id
    that no longer runs), its work is taken over at once. Where it cannot, ``dead``
    finds nothing and the heartbeat decides. The other way round, a holder storage knows
    alive (its lock held, its process running: ``alive``) keeps its work past an aged
    heartbeat, for a bounded while (the reaper's ``ALIVE_PATIENCE``).
    """

    def mark(self, worker_id: str) -> str:
        """The worker id a process uses while it keeps itself known alive with ``keep``."""

    async def keep(self, worker_id: str) -> None:
        """Keep ``worker_id`` known alive until cancelled (taken again after a lost
        connection). Returns at once where nothing needs keeping."""

    async def dead(self) -> set[str]:
        """Workers holding an operation or a chunk that are certainly no longer alive."""

    async def alive(self) -> set[str]:
        """Workers holding an operation or a chunk that are certainly alive now: their work
        is not taken over on the age of a heartbeat alone (a loaded machine delays live
        heartbeats). Holders it knows nothing of are left out, and the heartbeat decides."""

    async def expire(self, worker_ids: Collection[str]) -> None:
        """Void the heartbeats of what ``worker_ids`` hold, so it is abandoned now."""


class FileStore(Protocol):
    """Uploaded files, stored under generated ids (never the uploaded name)."""

    async def put(self, chunks: AsyncIterable[bytes]) -> StoredFile:
        """Store a stream under a new id. Nothing is kept when ``chunks`` raises."""

    def read(self, file_id: str) -> AsyncIterator[bytes]:
        """Stream the bytes of a stored file. Raises ``StorageError`` when missing."""

    def local_path(self, file_id: str) -> AbstractAsyncContextManager[Path]:
        """A local file with the stored bytes for the duration of the context.

        A local store yields its own file; remote stores stream a temporary copy.
        """

    async def delete(self, file_id: str) -> None:
        """Remove a stored file; missing files are ignored."""


class MappingStore(Protocol):
    """Saved column mappings, each named per operation and tenant (None: no tenant)."""

    async def save_mapping(self, mapping: SavedMapping) -> None:
        """Store ``mapping``, replacing the one of the same tenant, operation and name."""

    async def get_mapping(
        self, tenant: str | None, operation_name: str, name: str
    ) -> SavedMapping | None:
        """The mapping of that tenant, operation and name, or None."""

    async def list_mappings(self, tenant: str | None, operation_name: str) -> list[SavedMapping]:
        """The tenant's mappings of the operation, by name."""

    async def delete_mapping(self, tenant: str | None, operation_name: str, name: str) -> bool:
        """Remove the mapping; False when there was none."""


class ActionStore(Protocol):
    """Bulk actions and their items (see ``storage.actions``), shared by every process on
    the same storage: any of them may resume an action whose runner stopped."""

    async def add_action(self, record: ActionRecord, operation_ids: Sequence[UUID]) -> None:
        """Insert the action and one pending item per operation (positions from 0, in
        this order), in one transaction."""

    async def get_action(self, action_id: UUID) -> ActionRecord | None:
        """The action, or None."""

    async def list_actions(
        self, *, tenant: str | None, scoped: bool, page: int, page_size: int
    ) -> Page[ActionRecord]:
        """A page of actions, newest first (then by id); with ``scoped`` only those whose
        tenant is ``tenant``."""

    async def action_items(
        self, action_id: UUID, outcomes: Collection[Outcome], limit: int
    ) -> Sequence[ActionItem]:
        """Up to ``limit`` items of the action with one of ``outcomes``, by position."""

    async def claim_action(
        self, runner: str, now: datetime, stale_before: datetime
    ) -> ActionRecord | None:
        """Take one Running action nobody holds, that ``runner`` holds already (it stopped
        working on it after a storage failure), or whose runner's heartbeat is older than
        ``stale_before`` (oldest first): it is held by ``runner`` from ``now``.
        Concurrent claimers never get the same action. None when there is none."""

    async def record_item(
        self,
        action_id: UUID,
        position: int,
        outcome: Outcome,
        reason: str | None,
        runner: str,
        now: datetime,
    ) -> bool:
        """Record a pending item's outcome and count it on the action, renewing the
        runner's heartbeat, in one transaction; only while ``runner`` holds the Running
        action and the item is pending (False otherwise, nothing written)."""

    async def heartbeat_action(self, action_id: UUID, runner: str, now: datetime) -> bool:
        """Renew the heartbeat of a Running action ``runner`` holds; False when it does not
        hold it (another runner took it, or it ended)."""

    async def end_action(
        self, action_id: UUID, status: ActionStatus, now: datetime, runner: str | None = None
    ) -> ActionRecord | None:
        """Move a Running action to ``status`` (Completed or Cancelled) at ``now``, released;
        with ``runner``, only while it holds it. Returns the action after it, or None when
        it was not Running (or not held)."""
