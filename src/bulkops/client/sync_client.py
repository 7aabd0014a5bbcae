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
        """See ``AsyncClient.get_operations``."""
        return self._run(self._async.get_operations())

    def get_operation_template(self, name: str) -> str:
        """See ``AsyncClient.get_operation_template``."""
        return self._run(self._async.get_operation_template(name))

    def get_operation_mappings(self, name: str) -> list[SavedMapping]:
        """See ``AsyncClient.get_operation_mappings``."""
        return self._run(self._async.get_operation_mappings(name))

    def get_operation_mapping(self, name: str, mapping: str) -> SavedMapping:
        """See ``AsyncClient.get_operation_mapping``."""
        return self._run(self._async.get_operation_mapping(name, mapping))

    def save_operation_mapping(
        self, name: str, mapping: str, column_map: Mapping[str, str]
    ) -> SavedMapping:
        """See ``AsyncClient.save_operation_mapping``."""
        return self._run(self._async.save_operation_mapping(name, mapping, column_map))

    def delete_operation_mapping(self, name: str, mapping: str) -> None:
        """See ``AsyncClient.delete_operation_mapping``."""
        self._run(self._async.delete_operation_mapping(name, mapping))

    def create_bulk(
        self,
        operation_name: str | None,
        file: FileInput | None = None,
        metadata: Metadata = None,
        **options: Any,
    ) -> CreateResult:
        """See ``AsyncClient.create_bulk``."""
        return self._run(self._async.create_bulk(operation_name, file, metadata, **options))

    def validate_bulk(
        self,
        operation_name: str,
        file: FileInput | None = None,
        metadata: Metadata = None,
        **options: Any,
    ) -> ValidationResult:
        """See ``AsyncClient.validate_bulk``."""
        return self._run(self._async.validate_bulk(operation_name, file, metadata, **options))

    def get_bulks(self, **filters: Any) -> Page[Operation]:
        """See ``AsyncClient.get_bulks``."""
        return self._run(self._async.get_bulks(**filters))

    def get_bulk(self, id: UUID | str) -> Operation:
        """See ``AsyncClient.get_bulk``."""
        return self._run(self._async.get_bulk(id))

    def get_bulk_status(self, id: UUID | str) -> StatusView:
        """See ``AsyncClient.get_bulk_status``."""
        return self._run(self._async.get_bulk_status(id))

    def get_bulk_errors(self, id: UUID | str, **options: Any) -> Page[RowError]:
        """See ``AsyncClient.get_bulk_errors``."""
        return self._run(self._async.get_bulk_errors(id, **options))

    def get_bulk_rows(self, id: UUID | str, **options: Any) -> Page[RowProgress]:
        """See ``AsyncClient.get_bulk_rows``."""
        return self._run(self._async.get_bulk_rows(id, **options))

    def get_bulk_file(self, id: UUID | str, out: IO[bytes]) -> int:
        """See ``AsyncClient.get_bulk_file``."""
        return self._run(self._async.get_bulk_file(id, out))

    def export_bulk(self, id: UUID | str, out: IO[bytes], **options: Any) -> int:
        """See ``AsyncClient.export_bulk``."""
        return self._run(self._async.export_bulk(id, out, **options))

    def cancel_bulk(self, id: UUID | str) -> StatusView:
        """See ``AsyncClient.cancel_bulk``."""
        return self._run(self._async.cancel_bulk(id))

    def fix_bulk_row(
        self, id: UUID | str, row_number: int, row_data: Mapping[str, Any]
    ) -> RowError:
        """See ``AsyncClient.fix_bulk_row``."""
        return self._run(self._async.fix_bulk_row(id, row_number, row_data))

    def get_retry_eligibility(self, id: UUID | str) -> RetryEligibility:
        """See ``AsyncClient.get_retry_eligibility``."""
        return self._run(self._async.get_retry_eligibility(id))

    def create_action(self, action: str, filter: Mapping[str, Any], **options: Any) -> Action:
        """See ``AsyncClient.create_action``."""
        return self._run(self._async.create_action(action, filter, **options))

    def preview_action(
        self, action: str, filter: Mapping[str, Any], **options: Any
    ) -> ActionPreview:
        """See ``AsyncClient.preview_action``."""
        return self._run(self._async.preview_action(action, filter, **options))

    def get_action(self, id: UUID | str) -> ActionDetail:
        """See ``AsyncClient.get_action``."""
        return self._run(self._async.get_action(id))

    def get_actions(self, **options: Any) -> Page[Action]:
        """See ``AsyncClient.get_actions``."""
        return self._run(self._async.get_actions(**options))

    def cancel_action(self, id: UUID | str) -> Action:
        """See ``AsyncClient.cancel_action``."""
        return self._run(self._async.cancel_action(id))

    def retry_bulk(self, id: UUID | str, **options: Any) -> RetryResult:
        """See ``AsyncClient.retry_bulk``."""
        return self._run(self._async.retry_bulk(id, **options))

    def retry_bulk_rows(
        self, id: UUID | str, row_numbers: list[int], **options: Any
    ) -> RetryResult:
        """See ``AsyncClient.retry_bulk_rows``."""
        return self._run(self._async.retry_bulk_rows(id, row_numbers, **options))

    @overload
    def undo_bulk(self, id: UUID | str, *, preview: Literal[False] = False) -> Operation: ...

    @overload
    def undo_bulk(self, id: UUID | str, *, preview: Literal[True]) -> UndoPreview: ...

    def undo_bulk(self, id: UUID | str, *, preview: bool = False) -> Operation | UndoPreview:
        """See ``AsyncClient.undo_bulk``."""
        if preview:
            return self._run(self._async.undo_bulk(id, preview=True))
        return self._run(self._async.undo_bulk(id))

    def get_retry_history(self, id: UUID | str, **options: Any) -> Page[RetryHistoryItem]:
        """See ``AsyncClient.get_retry_history``."""
        return self._run(self._async.get_retry_history(id, **options))

    def signal_step(self, id: UUID | str, key: str) -> SignalResult:
        """See ``AsyncClient.signal_step``."""
        return self._run(self._async.signal_step(id, key))

    def fail_step(self, id: UUID | str, key: str, error_message: str) -> SignalResult:
        """See ``AsyncClient.fail_step``."""
        return self._run(self._async.fail_step(id, key, error_message))

    def get_events(
        self, *, since: int | None = None, limit: int | None = None, actor: str | None = None
    ) -> list[Event]:
        """See ``AsyncClient.get_events``."""
        return self._run(self._async.get_events(since=since, limit=limit, actor=actor))

    def get_bulk_events(self, id: UUID | str, **options: Any) -> list[Event]:
        """See ``AsyncClient.get_bulk_events``."""
        return self._run(self._async.get_bulk_events(id, **options))

    def get_usage(self, *, tenant: str | None = None) -> Usage:
        """See ``AsyncClient.get_usage``."""
        return self._run(self._async.get_usage(tenant=tenant))

    def get_liveness(self) -> Health:
        """See ``AsyncClient.get_liveness``."""
        return self._run(self._async.get_liveness())

    def get_readiness(self) -> Health:
        """See ``AsyncClient.get_readiness``."""
        return self._run(self._async.get_readiness())

    def get_metrics(self) -> str:
        """See ``AsyncClient.get_metrics``."""
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
        """See ``AsyncClient.submit``."""
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
        """See ``AsyncClient.wait``."""
        return self._run(self._async.wait(id, poll_interval=poll_interval, on_progress=on_progress))

    def iter_errors(self, id: UUID | str, **options: Any) -> Iterator[RowError]:
        """See ``AsyncClient.iter_errors``."""
        return self._iterate(self._async.iter_errors(id, **options))

    def iter_rows(self, id: UUID | str, **options: Any) -> Iterator[RowProgress]:
        """See ``AsyncClient.iter_rows``."""
        return self._iterate(self._async.iter_rows(id, **options))

    def follow_events(self, since: int | None = None, **options: Any) -> Iterator[Event]:
        """See ``AsyncClient.follow_events``."""
        return self._iterate(self._async.follow_events(since, **options))


async def _make(url: str, token: str | None, timeout: float, **options: Any) -> AsyncClient:
    # Built on the private loop: httpx binds its pool to the loop that first uses it.
    return AsyncClient(url, token, timeout, **options)
