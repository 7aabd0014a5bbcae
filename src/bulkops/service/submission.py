"""Creating and pre-flight validating operations from an upload."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Collection
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pydantic

from bulkops.clock import utcnow
from bulkops.definition.conversion import error_lines
from bulkops.definition.models import Metadata, dump_metadata
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.engine.invoke import error_text, invoke
from bulkops.errors import (
    BadRequest,
    FileFormatError,
    PayloadTooLarge,
    TooManyRequests,
    Unprocessable,
    UnsupportedMediaType,
)
from bulkops.formats import FileFormat, detect_format
from bulkops.formats.base import is_compressed
from bulkops.formats.xlsx import UnknownSheet, check_sheet
from bulkops.service.columns import parse_column_map
from bulkops.service.idempotency import Fingerprint, check_key
from bulkops.service.notifications import parse_notifications
from bulkops.service.ports import WorkQueue
from bulkops.service.preflight import check_file
from bulkops.storage.lifecycle import created_event
from bulkops.storage.ports import FileStore, OperationStore
from bulkops.storage.records import (
    SHEET_OPTION,
    ActiveLimit,
    IdempotencyKey,
    KeyInUse,
    LimitReached,
    OperationRecord,
)
from bulkops.storage.states import OperationStatus

ANONYMOUS = "anonymous"
_COPY_CHUNK = 1024 * 1024
# Retry-After of a create refused by BULKOPS_TENANT_MAX_ACTIVE: when a slot frees is not
# known, and a few seconds keep a waiting client from hammering the service.
ACTIVE_LIMIT_RETRY_AFTER = 10


@dataclass(slots=True)
class Upload:
    """An uploaded file: its declared name and type, and its bytes as a one-shot stream."""

    file_name: str | None
    content_type: str | None
    chunks: AsyncIterable[bytes]


@dataclass(slots=True)
class ValidationResult:
    """Outcome of validating a submission; ``suggested_column_map`` proposes a ``columnMap``
    for model columns the file lacks under their own names."""

    valid: bool
    metadata_errors: list[str] = field(default_factory=list)
    file_errors: list[str] = field(default_factory=list)
    suggested_column_map: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Created:
    """What a create did: the operation, and whether it replays an earlier request with the
    same ``Idempotency-Key`` (then nothing was created)."""

    record: OperationRecord
    replayed: bool = False


@dataclass(slots=True)
class _Checked:
    definition: OperationDefinition
    metadata: Metadata
    fmt: FileFormat
    upload: Upload


class SubmissionService:
    """Create and validate use-cases."""

    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        files: FileStore,
        work: WorkQueue,
        *,
        service_name: str,
        max_upload_bytes: int,
        idempotency_ttl: float = 86400.0,
        channels: Collection[str] | None = None,
        tenant_max_active: int | None = None,
    ) -> None:
        self._channels = channels
        self._active_limit = ActiveLimit(tenant_max_active) if tenant_max_active else None
        self._registry = registry
        self._operations = operations
        self._files = files
        self._work = work
        self._service_name = service_name
        self._max_upload_bytes = max_upload_bytes
        self._idempotency_ttl = idempotency_ttl

    def _definition(self, operation_name: str | None) -> OperationDefinition:
        if not operation_name or not operation_name.strip():
            raise BadRequest("operationName is required")
        definition = self._registry.get(operation_name.strip())
        if definition is None:
            raise BadRequest(f"Unknown operation {operation_name.strip()!r}")
        return definition

    def _format(self, upload: Upload | None) -> tuple[Upload, FileFormat]:
        if upload is None:
            raise BadRequest("A file part named 'file' is required")
        fmt = detect_format(upload.file_name, upload.content_type)
        if fmt is None:
            raise UnsupportedMediaType(
                f"Unsupported file type ({upload.file_name or upload.content_type or 'unknown'}):"
                " upload CSV (.csv), JSON (.json), JSON Lines (.jsonl, .ndjson) or XLSX (.xlsx),"
                " the first three also gzip-compressed (.gz)"
            )
        if fmt is FileFormat.XLSX and is_compressed(upload.file_name, upload.content_type):
            raise UnsupportedMediaType(
                "A gzip-compressed XLSX file is not read: an XLSX file is compressed already,"
                " upload the .xlsx file itself"
            )
        return upload, fmt

    @staticmethod
    def _sheet(fmt: FileFormat, sheet: str | None) -> str | None:
        """The ``sheet`` form field: None when absent or blank; only for XLSX files."""
        if sheet is None or not sheet.strip():
            return None
        if fmt is not FileFormat.XLSX:
            raise BadRequest(f"The sheet field applies to XLSX files only, not to {fmt.value}")
        return sheet

    async def _workbook_sheet(self, file_id: str, sheet: str | None) -> str:
        """The stored workbook's worksheet that ``sheet`` names (its first: None).

        Raises:
            BadRequest: the sheet is not in the workbook (naming its sheets), or the file
                is not a readable workbook.
        """
        async with self._files.local_path(file_id) as path:
            try:
                return await asyncio.to_thread(check_sheet, path, sheet)
            except UnknownSheet as exc:
                raise BadRequest(str(exc), sheets=exc.names) from None
            except FileFormatError as exc:
                raise BadRequest(str(exc)) from None

    def _metadata(self, definition: OperationDefinition, text: str | None) -> Metadata:
        try:
            data: Any = json.loads(text) if text and text.strip() else {}
        except json.JSONDecodeError as exc:
            raise _invalid_metadata([f"Metadata is not valid JSON: {exc.msg}"]) from None
        except (ValueError, RecursionError):  # absurd nesting or numbers
            raise _invalid_metadata(["Metadata is not valid JSON"]) from None
        if not isinstance(data, dict):
            raise _invalid_metadata(["Metadata must be a JSON object"])
        try:
            return definition.metadata_model.model_validate(data)
        except pydantic.ValidationError as exc:
            raise _invalid_metadata(error_lines(exc)) from None

    def _check(
        self, operation_name: str | None, metadata: str | None, upload: Upload | None
    ) -> _Checked:
        definition = self._definition(operation_name)
        checked_upload, fmt = self._format(upload)
        return _Checked(definition, self._metadata(definition, metadata), fmt, checked_upload)

    async def _limited(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        limit, seen = self._max_upload_bytes, 0
        async for chunk in chunks:
            seen += len(chunk)
            if limit and seen > limit:
                raise PayloadTooLarge(
                    f"File exceeds the upload limit of {limit} bytes", limit=limit
                )
            if chunk:
                yield chunk

    async def create(
        self,
        *,
        operation_name: str | None,
        metadata: str | None,
        upload: Upload | None,
        notifications: str | None = None,
        created_by: str | None = None,
        column_map: str | None = None,
        idempotency_key: str | None = None,
        tenant: str | None = None,
        sheet: str | None = None,
    ) -> Created:
        """Store the file and a Pending operation, then hand it on to be processed.

        With ``idempotency_key``, a request the same principal already made with that key
        (within the idempotency TTL) creates nothing and answers the first operation.
        ``tenant`` (the caller's) is stamped on the operation; with ``tenant_max_active``
        at most that many of its operations (of its creator's, without a tenant) are
        Pending, Running or Retrying at once. An XLSX file is read from its first
        worksheet, or the one ``sheet`` names (kept with the operation's options, see
        ``storage.records.stored_sheet``).

        Raises:
            BadRequest: unknown or missing operation, missing or empty file, bad
                notifications, column map or idempotency key; ``sheet`` for a file that
                is not XLSX, a sheet the workbook lacks, a workbook that cannot be read.
            UnsupportedMediaType: the file is not CSV, JSON, JSON Lines or XLSX.
            Unprocessable: the metadata or the column map does not fit the operation
                (carries the validation result), or the idempotency key was used with a
                different request.
            PayloadTooLarge: the file exceeds the upload limit.
            TooManyRequests: the tenant already has ``tenant_max_active`` active operations.
        """
        checked = self._check(operation_name, metadata, upload)
        notification_options = parse_notifications(notifications, self._channels)
        columns = parse_column_map(checked.definition, column_map)
        key = check_key(idempotency_key)
        sheet = self._sheet(checked.fmt, sheet)
        stored_metadata = dump_metadata(checked.metadata)
        fingerprint = Fingerprint(
            checked.definition.name, stored_metadata, columns if sheet is None else [columns, sheet]
        )
        stored = await self._files.put(fingerprint.through(self._limited(checked.upload.chunks)))
        if stored.size == 0:
            await self._files.delete(stored.file_id)
            raise BadRequest("The uploaded file is empty")
        if checked.fmt is FileFormat.XLSX:
            try:
                chosen = await self._workbook_sheet(stored.file_id, sheet)
            except BaseException:
                await self._files.delete(stored.file_id)
                raise
            if sheet is not None:
                notification_options = {**(notification_options or {}), SHEET_OPTION: chosen}
        now = utcnow()
        record = OperationRecord(
            id=uuid.uuid4(),
            operation_name=checked.definition.name,
            status=OperationStatus.PENDING,
            created_by=(created_by or "").strip() or ANONYMOUS,
            created_at=now,
            source=self._service_name,
            file_id=stored.file_id,
            file_name=_display_name(checked.upload.file_name, checked.fmt),
            file_size=stored.size,
            file_format=checked.fmt.value,
            metadata=stored_metadata,
            notifications=notification_options,
            column_map=columns,
            schema_version=checked.definition.controls.schema_version,
            tenant=tenant,
        )
        claim = None
        if key is not None:
            expires = now - timedelta(seconds=self._idempotency_ttl)
            claim = IdempotencyKey(_key_owner(record), key, fingerprint.hexdigest(), expires)
        try:
            used = await self._operations.add(
                record, [created_event(record, now)], idempotency=claim, limit=self._active_limit
            )
        except BaseException:
            await self._files.delete(stored.file_id)
            raise
        if isinstance(used, LimitReached):
            await self._files.delete(stored.file_id)
            raise self._limit_refusal(record, used)
        if used is not None:
            await self._files.delete(stored.file_id)
            return await self._replay(used, fingerprint.hexdigest())
        self._work.enqueue(record.id)
        return Created(record)

    def _limit_refusal(self, record: OperationRecord, reached: LimitReached) -> TooManyRequests:
        most = self._active_limit.most if self._active_limit else reached.active
        owner = (
            f"Tenant {record.tenant!r}"
            if record.tenant is not None
            else f"Creator {record.created_by!r}"
        )
        return TooManyRequests(
            f"{owner} already has {reached.active} operations Pending, Running or Retrying, "
            f"the most allowed (BULKOPS_TENANT_MAX_ACTIVE={most}); try again when one ends",
            retry_after=ACTIVE_LIMIT_RETRY_AFTER,
            limit=most,
            active=reached.active,
        )

    async def _replay(self, used: KeyInUse, fingerprint: str) -> Created:
        if used.fingerprint != fingerprint:
            raise Unprocessable(
                "Idempotency-Key was already used with a different request (operation name, "
                "metadata, column map or file content differ)",
                operationId=str(used.operation_id),
            )
        first = await self._operations.get(used.operation_id)
        if first is None:  # pragma: no cover - operations are never deleted
            raise Unprocessable("Idempotency-Key names an operation that no longer exists")
        return Created(first, replayed=True)

    async def validate(
        self,
        *,
        operation_name: str | None,
        metadata: str | None,
        upload: Upload | None,
        column_map: str | None = None,
        sheet: str | None = None,
    ) -> ValidationResult:
        """Check a submission without storing anything (an XLSX file's first worksheet,
        or the one ``sheet`` names; a workbook that cannot be read is a file error).

        Raises:
            BadRequest: unknown or missing operation, missing file, a malformed column
                map (one that does not fit the operation is among the ``fileErrors``),
                ``sheet`` for a file that is not XLSX, or a sheet the workbook lacks.
            UnsupportedMediaType: the file is not CSV, JSON, JSON Lines or XLSX.
            PayloadTooLarge: the file exceeds the upload limit.
        """
        definition = self._definition(operation_name)
        checked_upload, fmt = self._format(upload)
        sheet = self._sheet(fmt, sheet)
        result = ValidationResult(valid=True)
        columns = None
        try:
            columns = parse_column_map(definition, column_map)
        except Unprocessable as exc:
            result.file_errors.extend(exc.extra["fileErrors"])
        parsed: Metadata | None = None
        try:
            parsed = self._metadata(definition, metadata)
        except Unprocessable as exc:
            result.metadata_errors.extend(exc.extra["metadataErrors"])
        if parsed is not None and definition.overrides_validate_metadata:
            try:
                await invoke(definition.instantiate().validate_metadata, parsed)
            except Exception as exc:
                result.metadata_errors.append(error_text(exc))
        if not result.file_errors:  # a misfit column map makes the file's check moot
            async with self._spooled(checked_upload.chunks) as path:
                checked = await check_file(definition, path, fmt, parsed, columns, sheet)
            result.file_errors.extend(checked.errors)
            result.suggested_column_map = checked.suggested_column_map or None
        result.valid = not (result.metadata_errors or result.file_errors)
        return result

    @contextlib.asynccontextmanager
    async def _spooled(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[Path]:
        handle, name = tempfile.mkstemp(prefix="bulkops-validate-")
        path = Path(name)
        try:
            with os.fdopen(handle, "wb") as out:
                async for chunk in self._limited(chunks):
                    out.write(chunk)
            yield path
        finally:
            path.unlink(missing_ok=True)


def _key_owner(record: OperationRecord) -> str:
    """Whose ``Idempotency-Key`` it is: the creator, within its tenant. Two tenants may each
    have an "alice"; a key of one must never replay (and so reveal) the other's operation.
    A digest keeps the pair within the column's 200 characters."""
    if record.tenant is None:
        return record.created_by
    pair = f"{record.tenant}\0{record.created_by}".encode()
    return "tenant:" + hashlib.sha256(pair).hexdigest()


def _invalid_metadata(errors: list[str]) -> Unprocessable:
    return Unprocessable("Metadata is invalid", valid=False, metadataErrors=errors, fileErrors=[])


def _display_name(file_name: str | None, fmt: FileFormat) -> str:
    # Only the last path component is kept, whatever separators the client used; the name
    # is shown and used as the download name, never as a storage path.
    base = (file_name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip().strip(".")
    return base[:255] or f"upload.{fmt.value}"
