"""``AsyncClient``: every route of the API, and the helpers built on them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import IO, Any, Literal, overload
from uuid import UUID

from pydantic import TypeAdapter

from bulkops.client.action_models import Action, ActionDetail, ActionPreview
from bulkops.client.errors import ApiError
from bulkops.client.http import DEFAULT_URL as DEFAULT_URL
from bulkops.client.http import HttpSession, query
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
from bulkops.client.uploads import FileInput, FilePart, Metadata, form_fields, metadata_json

ProgressCallback = Callable[[StatusView], Any]

_EVENTS = TypeAdapter(list[Event])
_DESCRIPTORS = TypeAdapter(list[OperationDescriptor])
_MAPPINGS = TypeAdapter(list[SavedMapping])


class AsyncClient(HttpSession):
    """The bulkops HTTP API for async code. Use as an async context manager.

    Args:
        url: The service (or gateway) base URL.
        token: A bearer token, sent with every request.
        timeout: Seconds for each request.
        transport: An httpx transport (e.g. ``httpx.ASGITransport(app=app)`` in tests).
        retries: Attempts of a read (GET) that meets a connection error; writes are sent
            once, so a create never runs twice by accident (pass an idempotency key).
    """

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- discovery --------------------------------------------------------------------------

    async def get_operations(self) -> list[OperationDescriptor]:
        """The registered operations and their input shape."""
        return _DESCRIPTORS.validate_python(await self._json("GET", "/api/operations"))

    async def get_operation_template(self, name: str) -> str:
        """The CSV header template of an operation."""
        return (await self._send("GET", f"/api/operations/{name}/template")).text

    async def get_operation_mappings(self, name: str) -> list[SavedMapping]:
        """The column mappings saved for an operation (by the caller's tenant), by name."""
        body = await self._json("GET", f"/api/operations/{_segment(name)}/mappings")
        return _MAPPINGS.validate_python(body["items"])

    async def get_operation_mapping(self, name: str, mapping: str) -> SavedMapping:
        """One saved column mapping."""
        path = f"/api/operations/{_segment(name)}/mappings/{_segment(mapping)}"
        return await self._model(SavedMapping, "GET", path)

    async def save_operation_mapping(
        self, name: str, mapping: str, column_map: Mapping[str, str]
    ) -> SavedMapping:
        """Save ``column_map`` (file column -> row column) under ``mapping`` for the
        operation, replacing one of that name; create and validate take it as ``mapping``."""
        path = f"/api/operations/{_segment(name)}/mappings/{_segment(mapping)}"
        return await self._model(SavedMapping, "PUT", path, json={"columnMap": dict(column_map)})

    async def delete_operation_mapping(self, name: str, mapping: str) -> None:
        """Remove a saved column mapping."""
        path = f"/api/operations/{_segment(name)}/mappings/{_segment(mapping)}"
        await self._send("DELETE", path)

    async def download_operation_template(
        self, name: str, out: IO[bytes], *, format: str = "csv"
    ) -> int:
        """Stream the template file into ``out`` (``format`` csv, or xlsx for a workbook
        whose one sheet holds the header row); returns the bytes written."""
        return await self._stream_to(f"/api/operations/{name}/template", query(format=format), out)

    # --- operations -------------------------------------------------------------------------

    async def create_bulk(
        self,
        operation_name: str | None,
        file: FileInput | None = None,
        metadata: Metadata = None,
        *,
        column_map: Mapping[str, str] | None = None,
        notifications: Mapping[str, Any] | None = None,
        created_by: str | None = None,
        idempotency_key: str | None = None,
        dry_run: bool = False,
        source_operation_id: UUID | str | None = None,
        priority: int | None = None,
        sheet: str | None = None,
        source_url: str | None = None,
        mapping: str | None = None,
        reject_duplicate: bool = False,
    ) -> CreateResult:
        """Create an operation (``POST /api/bulks``) from an uploaded file, with
        ``source_url`` from a file the service reads itself (``s3://bucket/key`` or an
        allow-listed http(s) URL), or with ``source_operation_id`` from an earlier
        operation's stored file (its fixed rows' data applied; no file then). ``dry_run``:
        validate every row, process none; ``priority``: -10 to 10; ``sheet``: the
        worksheet of an ``.xlsx`` file; ``mapping``: a saved column mapping's name instead
        of ``column_map``; ``reject_duplicate``: refuse (409) a file an operation of the
        same name already had. From an earlier operation, what is left out
        (``operation_name`` None included) is its own.

        Raises:
            ValueError: Not exactly one of a file, ``source_url`` and
                ``source_operation_id``.
        """
        origins = (file, source_operation_id, source_url)
        if sum(origin is not None for origin in origins) != 1:
            raise ValueError(
                "create needs a file to upload, or source_operation_id to run from an earlier "
                "operation's file, or a source_url to read it from (one of them, not both)"
            )
        fields = form_fields(
            operationName=operation_name,
            metadata=None
            if metadata is None and source_operation_id is not None
            else metadata_json(metadata),
            columnMap=column_map,
            notifications=notifications,
            createdBy=created_by,
            dryRun=True if dry_run else None,
            sourceOperationId=source_operation_id,
            priority=priority,
            sheet=sheet,
            sourceUrl=source_url,
            mapping=mapping,
            rejectDuplicate=True if reject_duplicate else None,
        )
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        if file is None:
            return await self._model(
                CreateResult, "POST", "/api/bulks", files=fields, headers=headers
            )
        with FilePart(file) as part:
            return await self._model(
                CreateResult,
                "POST",
                "/api/bulks",
                files=[*fields, ("file", part)],
                headers=headers,
            )

    async def validate_bulk(
        self,
        operation_name: str,
        file: FileInput | None = None,
        metadata: Metadata = None,
        *,
        column_map: Mapping[str, str] | None = None,
        sheet: str | None = None,
        source_url: str | None = None,
        mapping: str | None = None,
    ) -> ValidationResult:
        """Check a submission without creating anything; an invalid one is a result with
        ``valid`` False, not an error. ``duplicate_of`` names the newest operation of the
        same name whose file had this file's hash. ``source_url`` instead of a file, and
        ``mapping``, as for ``create_bulk``.

        Raises:
            ValueError: Not exactly one of a file and ``source_url``.
        """
        if (file is None) == (source_url is None):
            raise ValueError("validate needs a file or a source_url (one of them)")
        fields = form_fields(
            operationName=operation_name,
            metadata=metadata_json(metadata),
            columnMap=column_map,
            sheet=sheet,
            sourceUrl=source_url,
            mapping=mapping,
        )
        if file is None:
            return await self._validation(fields)
        with FilePart(file) as part:
            return await self._validation([*fields, ("file", part)])

    async def _validation(self, parts: list[Any]) -> ValidationResult:
        try:
            body = await self._json("POST", "/api/bulks/validate", files=parts)
        except ApiError as exc:
            if exc.status_code == 422 and isinstance(exc.body, dict) and "valid" in exc.body:
                return ValidationResult.model_validate(exc.body)
            raise
        return ValidationResult.model_validate(body)

    async def get_bulks(
        self,
        *,
        page: int | None = None,
        page_size: int | None = None,
        operation_name: str | None = None,
        status: str | None = None,
        created_by: str | None = None,
        from_: str | None = None,
        to: str | None = None,
        source: str | None = None,
        file_sha256: str | None = None,
    ) -> Page[Operation]:
        """A page of operations, newest first (``source`` only through a gateway;
        ``file_sha256``: those whose stored file has that SHA-256)."""
        params = query(
            page=page,
            pageSize=page_size,
            operationName=operation_name,
            status=status,
            createdBy=created_by,
            to=to,
            source=source,
            fileSha256=file_sha256,
        )
        if from_ is not None:
            params["from"] = from_
        return await self._model(Page[Operation], "GET", "/api/bulks", params=params)

    async def get_bulk(self, id: UUID | str) -> Operation:
        """One operation's detail."""
        return await self._model(Operation, "GET", f"/api/bulks/{id}")

    async def get_bulk_status(self, id: UUID | str) -> StatusView:
        """Status and progress."""
        return await self._model(StatusView, "GET", f"/api/bulks/{id}/status")

    async def get_bulk_errors(
        self,
        id: UUID | str,
        *,
        page: int | None = None,
        page_size: int | None = None,
        error_type: str | None = None,
        row_number: int | None = None,
        after: int | None = None,
    ) -> Page[RowError]:
        """A page of failed rows (``after``: keyset paging from a ``next_after``)."""
        params = query(
            page=page, pageSize=page_size, errorType=error_type, rowNumber=row_number, after=after
        )
        return await self._model(Page[RowError], "GET", f"/api/bulks/{id}/errors", params=params)

    async def get_bulk_rows(
        self,
        id: UUID | str,
        *,
        page: int | None = None,
        page_size: int | None = None,
        state: str | None = None,
        step_name: str | None = None,
        after: int | None = None,
    ) -> Page[RowProgress]:
        """A page of rows with their steps (``after``: keyset paging)."""
        params = query(page=page, pageSize=page_size, state=state, stepName=step_name, after=after)
        return await self._model(Page[RowProgress], "GET", f"/api/bulks/{id}/rows", params=params)

    async def get_bulk_file(self, id: UUID | str, out: IO[bytes]) -> int:
        """Stream the original file into ``out``; returns its size."""
        return await self._stream_to(f"/api/bulks/{id}/file", {}, out)

    async def export_bulk(
        self,
        id: UUID | str,
        out: IO[bytes],
        *,
        mode: str = "report",
        format: str = "csv",
        state: str | None = None,
        error_type: str | None = None,
        step_name: str | None = None,
    ) -> int:
        """Stream an export (``mode`` report or data; ``format`` csv, json, jsonl or xlsx) into
        ``out``; returns the bytes written."""
        params = query(
            mode=mode, format=format, state=state, errorType=error_type, stepName=step_name
        )
        return await self._stream_to(f"/api/bulks/{id}/export", params, out)

    async def cancel_bulk(self, id: UUID | str) -> StatusView:
        """Cancel; 409 (ApiError) when it already finished."""
        return await self._model(StatusView, "POST", f"/api/bulks/{id}/cancel")

    # --- bulk actions -----------------------------------------------------------------------

    async def create_action(
        self,
        action: str,
        filter: Mapping[str, Any],
        *,
        from_step: str | None = None,
        include_completed: bool = False,
        reason: str | None = None,
    ) -> Action:
        """Start a bulk action (``retry``, ``cancel`` or ``restart``) on every operation
        ``filter`` matches (wire names: ``ids``, ``operationName``, ``status``,
        ``createdBy``, ``from``, ``to``); 400 (ApiError) for an empty filter."""
        body = _action_body(action, filter, from_step, include_completed, reason)
        return await self._model(Action, "POST", "/api/actions", json=body)

    async def preview_action(
        self,
        action: str,
        filter: Mapping[str, Any],
        *,
        from_step: str | None = None,
        include_completed: bool = False,
    ) -> ActionPreview:
        """How many operations the action would act on, and the first 25 (acts on none)."""
        body = _action_body(action, filter, from_step, include_completed, None)
        body["preview"] = True
        return await self._model(ActionPreview, "POST", "/api/actions", json=body)

    async def get_action(self, id: UUID | str) -> ActionDetail:
        """An action, its progress and the operations it skipped or failed on."""
        return await self._model(ActionDetail, "GET", f"/api/actions/{id}")

    async def get_actions(
        self, *, page: int | None = None, page_size: int | None = None
    ) -> Page[Action]:
        """Bulk actions, newest first."""
        params = query(page=page, pageSize=page_size)
        return await self._model(Page[Action], "GET", "/api/actions", params=params)

    async def cancel_action(self, id: UUID | str) -> Action:
        """Stop a Running action; 409 (ApiError) when it already ended."""
        return await self._model(Action, "POST", f"/api/actions/{id}/cancel")

    async def fix_bulk_row(
        self, id: UUID | str, row_number: int, row_data: Mapping[str, Any]
    ) -> RowError:
        """Correct a failed row's data in place (``PATCH /api/bulks/{id}/rows/{rowNumber}``;
        the whole row, by file column names). The server validates it at once: 422 ApiError
        with ``errors`` and nothing changed, 409 when the row or operation cannot be fixed.
        Returns the row with its new ``row_data`` and ``fixed`` True; the next retry uses it.
        Data equal to the row's current data changes nothing: the row comes back as it was,
        with ``unchanged`` True."""
        body = {"rowData": dict(row_data)}
        return await self._model(RowError, "PATCH", f"/api/bulks/{id}/rows/{row_number}", json=body)

    # --- retry ------------------------------------------------------------------------------

    async def get_retry_eligibility(self, id: UUID | str) -> RetryEligibility:
        """Whether the failed rows can be retried, and why not."""
        return await self._model(RetryEligibility, "GET", f"/api/bulks/{id}/retry/eligibility")

    async def retry_bulk(
        self,
        id: UUID | str,
        *,
        from_step: str | None = None,
        include_completed: bool = False,
    ) -> RetryResult:
        """Retry every failed row; 409 (ApiError, with ``reason``) when refused. With
        ``from_step`` (a pipeline's step name) and ``include_completed``, restart the rows
        from that step (Completed rows too)."""
        body = _restart(from_step, include_completed)
        return await self._model(
            RetryResult, "POST", f"/api/bulks/{id}/retry", json=body if body else None
        )

    async def retry_bulk_rows(
        self,
        id: UUID | str,
        row_numbers: list[int],
        *,
        from_step: str | None = None,
        include_completed: bool = False,
    ) -> RetryResult:
        """Retry the chosen failed rows (restart them with ``from_step`` and
        ``include_completed``)."""
        body = {"rowNumbers": list(row_numbers), **_restart(from_step, include_completed)}
        return await self._model(RetryResult, "POST", f"/api/bulks/{id}/retry/rows", json=body)

    async def get_retry_history(
        self,
        id: UUID | str,
        *,
        row_number: int | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Page[RetryHistoryItem]:
        """Earlier failures of retried rows."""
        params = query(rowNumber=row_number, page=page, pageSize=page_size)
        return await self._model(
            Page[RetryHistoryItem], "GET", f"/api/bulks/{id}/retry/history", params=params
        )

    # --- undo -------------------------------------------------------------------------------

    @overload
    async def undo_bulk(self, id: UUID | str, *, preview: Literal[False] = False) -> Operation: ...

    @overload
    async def undo_bulk(self, id: UUID | str, *, preview: Literal[True]) -> UndoPreview: ...

    async def undo_bulk(self, id: UUID | str, *, preview: bool = False) -> Operation | UndoPreview:
        """Undo a finished operation: the new undo operation (its ``undo_of`` is ``id``);
        with ``preview`` the rows and row-steps it would undo, nothing started. 409
        (ApiError, with ``reason``) when it is not finished, defines no undo or was
        already undone."""
        path = f"/api/bulks/{id}/undo"
        if preview:
            return await self._model(UndoPreview, "POST", path, json={"preview": True})
        return await self._model(Operation, "POST", path, json={})

    # --- signals ----------------------------------------------------------------------------

    async def signal_step(self, id: UUID | str, key: str) -> SignalResult:
        """Complete the first row waiting under ``key`` (404 ApiError when none waits)."""
        path = f"/api/bulks/{id}/signal/{_segment(key)}"
        return await self._model(SignalResult, "POST", path)

    async def fail_step(self, id: UUID | str, key: str, error_message: str) -> SignalResult:
        """Fail the first row waiting under ``key`` with ``error_message``."""
        path = f"/api/bulks/{id}/signal/{_segment(key)}/fail"
        body = {"errorMessage": error_message}
        return await self._model(SignalResult, "POST", path, json=body)

    # --- events and health -----------------------------------------------------------------

    async def get_events(
        self, *, since: int | None = None, limit: int | None = None, actor: str | None = None
    ) -> list[Event]:
        """The event feed across operations, oldest first (``since``: exclusive cursor;
        ``actor``: only the events it caused)."""
        params = query(since=since, limit=limit, actor=actor)
        return _EVENTS.validate_python(await self._json("GET", "/api/events", params=params))

    async def get_bulk_events(
        self,
        id: UUID | str,
        *,
        since: int | None = None,
        limit: int | None = None,
        actor: str | None = None,
    ) -> list[Event]:
        """One operation's events, oldest first (``actor``: only the events it caused)."""
        params = query(since=since, limit=limit, actor=actor)
        body = await self._json("GET", f"/api/bulks/{id}/events", params=params)
        return _EVENTS.validate_python(body)

    async def get_usage(self, *, tenant: str | None = None) -> Usage:
        """Each tenant's use by UTC day over the last 30 days: operations created, rows
        submitted and processed, bytes stored (operate access; a caller with a tenant gets
        its own; ``tenant``: only that one's)."""
        return await self._model(Usage, "GET", "/api/usage", params=query(tenant=tenant))

    async def get_liveness(self) -> Health:
        """The process is up."""
        return await self._model(Health, "GET", "/health/live")

    async def get_readiness(self) -> Health:
        """Storage is reachable (503 ApiError when not)."""
        return await self._model(Health, "GET", "/health/ready")

    async def get_metrics(self) -> str:
        """The Prometheus text of the process reached."""
        return (await self._send("GET", "/metrics")).text

    # --- helpers ----------------------------------------------------------------------------

    async def submit(
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
        """Create an operation from a file, from a file the service reads itself
        (``source_url``: ``s3://bucket/key`` or an allow-listed http(s) URL), or from an
        earlier operation's stored file (``source_operation_id``, no file: typically a dry
        run's, once its rows are fixed); returns its id. Run from an earlier operation, the
        operation name (None), metadata and column map left out are that operation's own.
        ``mapping``: a saved column mapping's name; ``reject_duplicate``: refuse (409) a
        file an operation of the same name already had.

        Raises:
            ValueError: Not exactly one of a file, ``source_url`` and
                ``source_operation_id``; no operation name with a file or a URL.
        """
        if file is None and source_operation_id is None and source_url is None:
            raise ValueError(
                "submit needs a file, or source_operation_id to run from an earlier operation, "
                "or a source_url to read the file from"
            )
        if operation is None and (file is not None or source_url is not None):
            raise ValueError("submit needs the operation name of the file")
        created = await self.create_bulk(
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
        return created.operation_id

    async def wait(
        self,
        id: UUID | str,
        *,
        poll_interval: float = 2.0,
        on_progress: ProgressCallback | None = None,
    ) -> StatusView:
        """Poll the status until it is final; ``on_progress`` sees every status read (it
        may be a coroutine function). Returns the final status."""
        while True:
            status = await self.get_bulk_status(id)
            if on_progress is not None:
                outcome = on_progress(status)
                if isinstance(outcome, Awaitable):
                    await outcome
            if status.finished:
                return status
            await asyncio.sleep(poll_interval)

    async def iter_errors(
        self, id: UUID | str, *, page_size: int = 100, error_type: str | None = None
    ) -> AsyncIterator[RowError]:
        """Every failed row, by row number (keyset paging: stable however many there are)."""
        after: int | None = 0
        while after is not None:
            found = await self.get_bulk_errors(
                id, page_size=page_size, error_type=error_type, after=after
            )
            for row in found.items:
                yield row
            after = found.next_after

    async def iter_rows(
        self, id: UUID | str, *, page_size: int = 100, state: str | None = None
    ) -> AsyncIterator[RowProgress]:
        """Every row (or those in ``state``), by row number."""
        after: int | None = 0
        while after is not None:
            found = await self.get_bulk_rows(id, page_size=page_size, state=state, after=after)
            for row in found.items:
                yield row
            after = found.next_after

    async def follow_events(
        self,
        since: int | None = None,
        *,
        operation_id: UUID | str | None = None,
        poll_interval: float = 1.0,
        limit: int = 100,
    ) -> AsyncIterator[Event]:
        """The event feed as it grows, forever (break out of the loop to stop).

        From ``since`` (exclusive) when given; else the newest ``limit`` events first, whose
        last sequence becomes the cursor. The cursor moves with every event yielded, so a
        new call with the last ``sequence`` seen resumes without gaps or repeats.
        """
        cursor = since
        while True:
            if operation_id is not None:
                found = await self.get_bulk_events(operation_id, since=cursor, limit=limit)
            else:
                found = await self.get_events(since=cursor, limit=limit)
            for event in found:
                cursor = event.sequence
                yield event
            if cursor is None:
                cursor = 0  # an empty feed: everything from now on is new
            if len(found) < limit:
                await asyncio.sleep(poll_interval)


def _segment(key: str) -> str:
    from urllib.parse import quote

    return quote(key, safe="")


def _restart(from_step: str | None, include_completed: bool) -> dict[str, Any]:
    """The restart options of a retry body (empty for a plain retry)."""
    body: dict[str, Any] = {}
    if from_step is not None:
        body["fromStep"] = from_step
    if include_completed:
        body["includeCompleted"] = True
    return body


def _action_body(
    action: str,
    filter: Mapping[str, Any],
    from_step: str | None,
    include_completed: bool,
    reason: str | None,
) -> dict[str, Any]:
    """The body of ``POST /api/actions``."""
    body: dict[str, Any] = {"action": action, "filter": dict(filter)}
    if from_step is not None:
        body["fromStep"] = from_step
    if include_completed:
        body["includeCompleted"] = True
    if reason is not None:
        body["reason"] = reason
    return body
