"""``Client``: the same API for code that is not async, driving an ``AsyncClient``.

Every method runs the ``AsyncClient`` method of the same name on a private event loop, so
the two never drift apart. Inside async code use ``AsyncClient`` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import IO, Any, Literal, TypeVar, overload
from uuid import UUID

import httpx

from bulkops.client.action_models import Action, ActionDetail, ActionPreview
from bulkops.client.async_client import DEFAULT_URL, AsyncClient, ProgressCallback
from bulkops.client.models import (
    CreateResult,
    Event,
    Health,
    Operation,
    OperationDescriptor,
    Page,
    RetryEligibility,
    RetryHistoryItem,
    RetryResult,
    RowError,
    RowProgress,
    SavedMapping,
    SignalResult,
    StatusView,
    UndoPreview,
    Usage,
    ValidationResult,
)
from bulkops.client.uploads import FileInput, Metadata

T = TypeVar("T")


class Client:
    """The bulkops HTTP API for synchronous code; a context manager.

    Takes the arguments of ``AsyncClient`` (``url``, ``token``, ``timeout``, ``retries``;
    ``transport`` is an async httpx transport). Methods are those of ``AsyncClient``.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = 3,
    ) -> None:
        self._runner = asyncio.Runner()
        self._async = self._runner.run(
            _make(url, token, timeout, transport=transport, retries=retries)
        )
        self.url = self._async.url

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and the private event loop."""
        try:
            self._runner.run(self._async.aclose())
        finally:
            self._runner.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(work)

    def _iterate(self, source: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self._run(anext(source))  # type: ignore[arg-type]
                except StopAsyncIteration:
                    return
        finally:
            closing = getattr(source, "aclose", None)
            if closing is not None:
                self._run(closing())

    # One line per route: the AsyncClient method of the same name does the work.

    def get_operations(self) -> list[OperationDescriptor]:
        """The registered operations and their input shape."""
        return self._run(self._async.get_operations())

    def get_operation_template(self, name: str) -> str:
        """The CSV header template of an operation."""
        return self._run(self._async.get_operation_template(name))

    def get_operation_mappings(self, name: str) -> list[SavedMapping]:
        """The column mappings saved for an operation (by the caller's tenant), by name."""
        return self._run(self._async.get_operation_mappings(name))

    def get_operation_mapping(self, name: str, mapping: str) -> SavedMapping:
        """One saved column mapping (404 ApiError when there is none of that name)."""
        return self._run(self._async.get_operation_mapping(name, mapping))

    def save_operation_mapping(
        self, name: str, mapping: str, column_map: Mapping[str, str]
    ) -> SavedMapping:
        """Save ``column_map`` (file column -> row column) under ``mapping``, replacing it."""
        return self._run(self._async.save_operation_mapping(name, mapping, column_map))

    def delete_operation_mapping(self, name: str, mapping: str) -> None:
        """Remove a saved column mapping."""
        self._run(self._async.delete_operation_mapping(name, mapping))

    def download_operation_template(self, name: str, out: IO[bytes], *, format: str = "csv") -> int:
        """Stream the template file into ``out`` (``format`` csv, or xlsx for a workbook
        whose one sheet holds the header row); returns the bytes written."""
        return self._run(self._async.download_operation_template(name, out, format=format))

    def create_bulk(
        self,
        operation_name: str | None,
        file: FileInput | None = None,
        metadata: Metadata = None,
        **options: Any,
    ) -> CreateResult:
        """Create an operation (``POST /api/bulks``) from an uploaded file, or with
        ``source_operation_id`` from an earlier operation's stored file (its fixed rows'
        data applied; no file then). ``dry_run``: validate every row, process none;
        ``priority``: -10 to 10; ``sheet``: the worksheet of an ``.xlsx`` file. From an
        earlier operation, what is left out (``operation_name`` None included) is its own.

        Raises:
            ValueError: Neither a file nor ``source_operation_id``, or both.
        """
        return self._run(self._async.create_bulk(operation_name, file, metadata, **options))

    def validate_bulk(
        self,
        operation_name: str,
        file: FileInput | None = None,
        metadata: Metadata = None,
        **options: Any,
    ) -> ValidationResult:
        """Check a submission without creating anything; an invalid one is a result with
        ``valid`` False, not an error.
        """
        return self._run(self._async.validate_bulk(operation_name, file, metadata, **options))

    def get_bulks(self, **filters: Any) -> Page[Operation]:
        """A page of operations, newest first (``source`` only through a gateway)."""
        return self._run(self._async.get_bulks(**filters))

    def get_bulk(self, id: UUID | str) -> Operation:
        """One operation's detail."""
        return self._run(self._async.get_bulk(id))

    def get_bulk_status(self, id: UUID | str) -> StatusView:
        """Status and progress."""
        return self._run(self._async.get_bulk_status(id))

    def get_bulk_errors(self, id: UUID | str, **options: Any) -> Page[RowError]:
        """A page of failed rows (``after``: keyset paging from a ``next_after``)."""
        return self._run(self._async.get_bulk_errors(id, **options))

    def get_bulk_rows(self, id: UUID | str, **options: Any) -> Page[RowProgress]:
        """A page of rows with their steps (``after``: keyset paging)."""
        return self._run(self._async.get_bulk_rows(id, **options))

    def get_bulk_file(self, id: UUID | str, out: IO[bytes]) -> int:
        """Stream the original file into ``out``; returns its size."""
        return self._run(self._async.get_bulk_file(id, out))

    def export_bulk(self, id: UUID | str, out: IO[bytes], **options: Any) -> int:
        """Stream an export (``mode`` report or data; ``format`` csv, json, jsonl or xlsx) into
        ``out``; returns the bytes written.
        """
        return self._run(self._async.export_bulk(id, out, **options))

    def cancel_bulk(self, id: UUID | str) -> StatusView:
        """Cancel; 409 (ApiError) when it already finished."""
        return self._run(self._async.cancel_bulk(id))

    def fix_bulk_row(
        self, id: UUID | str, row_number: int, row_data: Mapping[str, Any]
    ) -> RowError:
        """Correct a failed row's data in place (``PATCH /api/bulks/{id}/rows/{rowNumber}``;
        the whole row, by file column names). The server validates it at once: 422 ApiError
        with ``errors`` and nothing changed, 409 when the row or operation cannot be fixed.
        Returns the row with its new ``row_data`` and ``fixed`` True; the next retry uses it.
        Data equal to the row's current data changes nothing: the row comes back as it was,
        with ``unchanged`` True.
        """
        return self._run(self._async.fix_bulk_row(id, row_number, row_data))

    def get_retry_eligibility(self, id: UUID | str) -> RetryEligibility:
        """Whether the failed rows can be retried, and why not."""
        return self._run(self._async.get_retry_eligibility(id))

    def create_action(self, action: str, filter: Mapping[str, Any], **options: Any) -> Action:
        """Start a bulk action: retry, cancel or restart every operation ``filter`` matches."""
        return self._run(self._async.create_action(action, filter, **options))

    def preview_action(
        self, action: str, filter: Mapping[str, Any], **options: Any
    ) -> ActionPreview:
        """How many operations the action would act on, and the first 25 (acts on none)."""
        return self._run(self._async.preview_action(action, filter, **options))

    def get_action(self, id: UUID | str) -> ActionDetail:
        """An action, its progress and the operations it skipped or failed on."""
        return self._run(self._async.get_action(id))

    def get_actions(self, **options: Any) -> Page[Action]:
        """Bulk actions, newest first (``page``, ``page_size``)."""
        return self._run(self._async.get_actions(**options))

    def cancel_action(self, id: UUID | str) -> Action:
        """Stop a Running action; 409 (ApiError) when it already ended."""
        return self._run(self._async.cancel_action(id))

    def retry_bulk(self, id: UUID | str, **options: Any) -> RetryResult:
        """Retry every failed row (``from_step``, ``include_completed``: restart from a
        step); 409 (ApiError, with ``reason``) when refused."""
        return self._run(self._async.retry_bulk(id, **options))

    def retry_bulk_rows(
        self, id: UUID | str, row_numbers: list[int], **options: Any
    ) -> RetryResult:
        """Retry the chosen failed rows (``from_step``, ``include_completed``: restart them
        from a step)."""
        return self._run(self._async.retry_bulk_rows(id, row_numbers, **options))

    @overload
    def undo_bulk(self, id: UUID | str, *, preview: Literal[False] = False) -> Operation: ...

    @overload
    def undo_bulk(self, id: UUID | str, *, preview: Literal[True]) -> UndoPreview: ...

    def undo_bulk(self, id: UUID | str, *, preview: bool = False) -> Operation | UndoPreview:
        """Undo a finished operation (the new undo operation); ``preview``: only count it."""
        if preview:
            return self._run(self._async.undo_bulk(id, preview=True))
        return self._run(self._async.undo_bulk(id))

    def get_retry_history(self, id: UUID | str, **options: Any) -> Page[RetryHistoryItem]:
        """Earlier failures of retried rows."""
        return self._run(self._async.get_retry_history(id, **options))

    def signal_step(self, id: UUID | str, key: str) -> SignalResult:
        """Complete the first row waiting under ``key`` (404 ApiError when none waits)."""
        return self._run(self._async.signal_step(id, key))

    def fail_step(self, id: UUID | str, key: str, error_message: str) -> SignalResult:
        """Fail the first row waiting under ``key`` with ``error_message``."""
        return self._run(self._async.fail_step(id, key, error_message))

    def get_events(
        self, *, since: int | None = None, limit: int | None = None, actor: str | None = None
    ) -> list[Event]:
        """The event feed across operations, oldest first (``since``: exclusive cursor;
        ``actor``: only that actor's events)."""
        return self._run(self._async.get_events(since=since, limit=limit, actor=actor))

    def get_bulk_events(self, id: UUID | str, **options: Any) -> list[Event]:
        """One operation's events, oldest first."""
        return self._run(self._async.get_bulk_events(id, **options))

    def get_usage(self, *, tenant: str | None = None) -> Usage:
        """Each tenant's use by UTC day over the last 30 days (``tenant``: only that one)."""
        return self._run(self._async.get_usage(tenant=tenant))

    def get_liveness(self) -> Health:
        """The process is up."""
        return self._run(self._async.get_liveness())

    def get_readiness(self) -> Health:
        """Storage is reachable (503 ApiError when not)."""
        return self._run(self._async.get_readiness())

    def get_metrics(self) -> str:
        """The Prometheus text of the process reached."""
        return self._run(self._async.get_metrics())

    def submit(
        self,
        operation: str | None,
        file: FileInput | None = None,
        metadata: Metadata = None,
        *,
        column_map: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        dry_run: bool = False,
        source_operation_id: UUID | str | None = None,
        priority: int | None = None,
        sheet: str | None = None,
        source_url: str | None = None,
        mapping: str | None = None,
        reject_duplicate: bool = False,
    ) -> UUID:
        """Create an operation from a file, or from an earlier operation's stored file
        (``source_operation_id``, no file: typically a dry run's, once its rows are fixed);
        returns its id. Run from an earlier operation, the operation name (None), metadata
        and column map left out are that operation's own.

        Raises:
            ValueError: Neither a file nor ``source_operation_id``, or both; no operation
                name with a file.
        """
        return self._run(
            self._async.submit(
                operation,
                file,
                metadata,
                column_map=column_map,
                idempotency_key=idempotency_key,
                dry_run=dry_run,
                source_operation_id=source_operation_id,
                priority=priority,
                sheet=sheet,
                source_url=source_url,
                mapping=mapping,
                reject_duplicate=reject_duplicate,
            )
        )

    def wait(
        self,
        id: UUID | str,
        *,
        poll_interval: float = 2.0,
        on_progress: ProgressCallback | None = None,
    ) -> StatusView:
        """Poll the status until it is final; ``on_progress`` sees every status read (it
        may be a coroutine function). Returns the final status.
        """
        return self._run(self._async.wait(id, poll_interval=poll_interval, on_progress=on_progress))

    def iter_errors(self, id: UUID | str, **options: Any) -> Iterator[RowError]:
        """Every failed row, by row number (keyset paging: stable however many there are)."""
        return self._iterate(self._async.iter_errors(id, **options))

    def iter_rows(self, id: UUID | str, **options: Any) -> Iterator[RowProgress]:
        """Every row (or those in ``state``), by row number."""
        return self._iterate(self._async.iter_rows(id, **options))

    def follow_events(self, since: int | None = None, **options: Any) -> Iterator[Event]:
        """The event feed as it grows, forever (break out of the loop to stop).

        From ``since`` (exclusive) when given; else the newest ``limit`` events first, whose
        last sequence becomes the cursor. The cursor moves with every event yielded, so a
        new call with the last ``sequence`` seen resumes without gaps or repeats.
        """
        return self._iterate(self._async.follow_events(since, **options))


async def _make(url: str, token: str | None, timeout: float, **options: Any) -> AsyncClient:
    # Built on the private loop: httpx binds its pool to the loop that first uses it.
    return AsyncClient(url, token, timeout, **options)
