"""Storage contracts. Adapters (memory, SQL, object storage) implement these Protocols.

Every adapter passes the same contract suite (``tests/contract``). Timestamps going in and
coming out are timezone-aware UTC. Adapters translate their driver errors into
``bulkops.errors.StorageError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Protocol
from uuid import UUID

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
    StoredFile,
    WaitOutcome,
)
from bulkops.storage.states import OperationStatus, RowState


class OperationStore(Protocol):
    """Operation records and their status, guarded by the transition table."""

    async def ping(self) -> None:
        """Raise ``StorageError`` when the backend is unreachable."""

    async def add(self, record: OperationRecord) -> None:
        """Insert a new operation record."""

    async def get(self, operation_id: UUID) -> OperationRecord | None:
        """The record, or None when unknown."""

    async def list(self, query: OperationQuery) -> Page[OperationRecord]:
        """A page of records matching the query, newest ``created_at`` first, then by id."""

    async def claimable(self, limit: int) -> Sequence[OperationRecord]:
        """Up to ``limit`` Pending or Retrying operations, oldest first."""

    async def claim(
        self, operation_id: UUID, version: int, worker_id: str, now: datetime
    ) -> OperationRecord | None:
        """Move a claimable operation whose token is ``version`` to Running.

        Sets ``worker_id``, ``heartbeat_at=now``, ``started_at`` (first claim only) and
        increments the token. Returns the updated record, or None when another writer got
        there first (the caller skips the operation).
        """

    async def transition(
        self,
        operation_id: UUID,
        target: OperationStatus,
        now: datetime,
        *,
        error_message: str | None = None,
        expected_version: int | None = None,
    ) -> OperationRecord | None:
        """Change the status when the transition table allows it from the current one.

        Increments the token. A terminal target sets ``completed_at=now``; Pending clears the
        worker. ``error_message`` is stored when given. With ``expected_version`` the change
        also requires that token. Returns the updated record, or None when refused.
        """

    async def set_total_rows(self, operation_id: UUID, total_rows: int) -> None:
        """Record how many data rows the file holds."""

    async def heartbeat(self, operation_ids: Sequence[UUID], worker_id: str, now: datetime) -> None:
        """Renew ``heartbeat_at`` of the Running operations this worker holds."""

    async def running(self) -> Sequence[OperationRecord]:
        """Every Running operation."""

    async def recount(self, operation_id: UUID) -> OperationRecord | None:
        """Recompute processed, successful and error counters from the stored row states."""


class RowStore(Protocol):
    """Row records of operations."""

    async def save(
        self, operation_id: UUID, rows: Sequence[RowRecord], delta: ProgressDelta
    ) -> OperationStatus | None:
        """Upsert row records (by operation and row number) and add ``delta`` to the
        operation's counters, in one transaction.

        Returns the operation's status after the write (None when the operation is unknown),
        so a worker notices a cancellation at every flush.
        """

    async def get_row(self, operation_id: UUID, row_number: int) -> RowRecord | None:
        """One row record, or None."""

    async def page(self, query: RowQuery) -> Page[RowRecord]:
        """A page of row records matching the query, by row number."""

    async def final_row_numbers(self, operation_id: UUID, after: int, limit: int) -> Sequence[int]:
        """Ascending row numbers above ``after`` whose state is Completed or Failed."""

    def iterate(
        self,
        operation_id: UUID,
        *,
        batch_size: int = 1000,
        state: RowState | None = None,
    ) -> AsyncIterator[RowRecord]:
        """Every row record of an operation (or those in ``state``) by row number, fetched
        in batches."""

    async def find_waiting(self, operation_id: UUID, key_prefix: str) -> RowRecord | None:
        """The row that started waiting first (ties by row number) among the operation's
        WaitingForCompletion rows whose signal key is ``key_prefix`` + its row number."""

    async def resolve_wait(
        self, operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
    ) -> RowRecord | None:
        """End a wait atomically: only when the row is still WaitingForCompletion with this
        signal key (None for polling steps). Applies ``records.resolve_wait`` and returns the
        stored result, or None when the row was not waiting (someone else ended it)."""


class RetryStore(Protocol):
    """Retry rounds and their history (implemented by the same object as the row store)."""

    async def begin_retry(self, request: RetryRequest, now: datetime) -> RetryStart | None:
        """Start a retry round in one transaction.

        When the operation is CompletedWithErrors with token ``expected_version``: snapshot
        each qualifying row's error into the history, reset those rows to Pending with
        ``retry_attempt + 1`` (keeping their step progress), and move the operation to
        Retrying with ``retry_count + 1``. When no row qualifies nothing changes and
        ``rows_reset`` is 0. Returns None when the operation is not CompletedWithErrors with
        that token (another writer got there first).
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
        self, *, after: int | None, limit: int, operation_id: UUID | None = None
    ) -> Sequence[EventRecord]:
        """Events oldest first.

        With ``after``: those with a sequence above it, at most ``limit``. Without: the newest
        ``limit`` events. ``operation_id`` restricts to one operation.
        """

    async def prune(self, before: datetime) -> int:
        """Delete events older than ``before``; return how many."""


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
