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
from datetime import datetime, timedelta
from functools import partial
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
    Conflict,
    FileFormatError,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    Unprocessable,
    UnsupportedMediaType,
)
from bulkops.formats import FileFormat, FileLimits, count_rows, detect_format
from bulkops.formats.base import GZIP_MAGIC, corrupt_gzip_message, is_compressed
from bulkops.formats.limits import ExpandedTooLarge, TooManyRows
from bulkops.service.columns import parse_column_map
from bulkops.service.duplicates import FileHash, find_duplicate
from bulkops.service.idempotency import Fingerprint, check_key
from bulkops.service.notifications import parse_notifications
from bulkops.service.ports import WorkQueue
from bulkops.service.preflight import check_file
from bulkops.service.priority import parse_priority
from bulkops.service.saved_mappings import MappingLookup
from bulkops.service.usage import RowsPerDay
from bulkops.sources.base import SourceOpener
from bulkops.storage.lifecycle import created_event
from bulkops.storage.ports import FileStore, OperationStore
from bulkops.storage.records import (
    ActiveLimit,
    IdempotencyKey,
    KeyInUse,
    LimitReached,
    OperationRecord,
    StoredFile,
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
    # The newest operation of the same name and tenant whose file had this file's hash.
    duplicate_of: uuid.UUID | None = None


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


@dataclass(slots=True)
class _Content:
    """What a create reads: an upload to store, or an earlier operation's stored file."""

    definition: OperationDefinition
    metadata: dict[str, Any]
    columns: dict[str, str] | None
    fingerprint: Fingerprint
    origin: _Checked | OperationRecord  # the checked upload, or the source operation
    sheet: str | None = None  # the worksheet the create named (an XLSX upload)
    file_sha256: str | None = None  # the stored file's hash, once stored

    @property
    def source(self) -> OperationRecord | None:
        """The operation whose stored file is read, if any."""
        return self.origin if isinstance(self.origin, OperationRecord) else None


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
        mappings: MappingLookup | None = None,
        sources: SourceOpener | None = None,
        file_limits: FileLimits | None = None,
        tenant_max_rows_per_day: int | None = None,
    ) -> None:
        self._mappings = mappings
        self._sources = sources
        self._file_limits = file_limits or FileLimits()
        self._rows_per_day = (
            RowsPerDay(tenant_max_rows_per_day) if tenant_max_rows_per_day else None
        )
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
            raise _invalid_file(f"The sheet field applies to XLSX files only, not to {fmt.value}")
        return sheet

    async def _workbook_sheet(self, file_id: str, sheet: str | None) -> str:
        """The stored workbook's worksheet that ``sheet`` names (its first: None).

        Raises:
            BadRequest: the sheet is not in the workbook (naming its sheets).
            Unprocessable: the file is not a readable workbook (a file error).
        """
        # Imported here: openpyxl is needed only when a workbook is read.
        from bulkops.formats.xlsx import UnknownSheet, check_sheet

        async with self._files.local_path(file_id) as path:
            try:
                return await asyncio.to_thread(check_sheet, path, sheet)
            except UnknownSheet as exc:
                raise BadRequest(str(exc), sheets=exc.names) from None
            except FileFormatError as exc:
                raise _invalid_file(str(exc)) from None

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

    def _stream(self, upload: Upload) -> AsyncIterator[bytes]:
        """The upload's bytes within the limit; one its name or type says is gzip must
        start as gzip does (a plain file named ``.gz`` would otherwise be read as plain)."""
        limited = self._limited(upload.chunks)
        if is_compressed(upload.file_name, upload.content_type):
            return _gzip_only(limited)
        return limited

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
        dry_run: str | None = None,
        source_operation_id: str | None = None,
        priority: str | int | None = None,
        reject_duplicate: str | None = None,
        mapping: str | None = None,
        source_url: str | None = None,
    ) -> Created:
        """Store the file and a Pending operation, then hand it on to be processed.

        With ``idempotency_key``, a request the same principal already made with that key
        (within the idempotency TTL) creates nothing and answers the first operation.
        ``tenant`` (the caller's) is stamped on the operation; with ``tenant_max_active``
        at most that many of its operations (of its creator's, without a tenant) are
        Pending, Running or Retrying at once. An XLSX file is read from its first
        worksheet, or the one ``sheet`` names (kept as the operation's ``sheet``).
        ``dry_run`` (``true`` or ``false``): validate every row, run nothing.
        ``source_operation_id`` instead of an upload: read that operation's stored file
        (and worksheet), with its fixed rows' data (``engine.resume.source_fixes``); its
        metadata and column map unless given. ``source_url`` instead of an upload: the
        file is fetched from there (``bulkops.sources``) and stored like an upload.
        ``mapping``: the column map saved under that name for the operation and tenant.
        ``reject_duplicate`` (``true``): refuse a file whose hash an operation of the same
        name and tenant already had.

        Raises:
            BadRequest: unknown or missing operation, missing or empty file, bad
                notifications, column map, idempotency key, dryRun or priority; ``sheet``
                for a file that is not XLSX, a sheet the workbook lacks, a workbook that
                cannot be read; a source of another operation.
            NotFound: the source operation is unknown (or another tenant's).
            UnsupportedMediaType: the file is not CSV, JSON, JSON Lines or XLSX.
            Unprocessable: the metadata or the column map does not fit the operation, a
                file and a source operation both, a sheet with a source operation (carries
                the validation result), or the idempotency key was used with a different
                request.
            PayloadTooLarge: the file exceeds the upload limit.
            TooManyRequests: the tenant already has ``tenant_max_active`` active operations.
            Conflict: ``reject_duplicate`` and a duplicate (naming it in ``duplicateOf``).
            BadGateway: the source URL could not be read.
        """
        if source_url is not None and source_url.strip():
            # What can be refused without the file is refused before anything is fetched.
            self._one_origin(upload, source_operation_id)
            self._metadata(self._definition(operation_name), metadata)
            column_map = await self._mapped(operation_name, mapping, column_map, tenant)
            async with self._open_source(source_url) as fetched:
                return await self.create(
                    operation_name=operation_name,
                    metadata=metadata,
                    upload=fetched,
                    notifications=notifications,
                    created_by=created_by,
                    column_map=column_map,
                    idempotency_key=idempotency_key,
                    tenant=tenant,
                    sheet=sheet,
                    dry_run=dry_run,
                    priority=priority,
                    reject_duplicate=reject_duplicate,
                )
        rejecting = parse_flag("rejectDuplicate", reject_duplicate)
        column_map = await self._mapped(operation_name, mapping, column_map, tenant)
        rank = parse_priority(priority)
        dry = parse_flag("dryRun", dry_run)
        if source_operation_id is not None:
            content = await self._from_source(
                source_operation_id, operation_name, metadata, column_map, tenant, upload, sheet
            )
        else:
            content = self._from_upload(operation_name, metadata, upload, column_map, sheet)
        definition, fingerprint = content.definition, content.fingerprint
        notification_options = parse_notifications(notifications, self._channels)
        key = check_key(idempotency_key)
        if dry:
            fingerprint.include("dryRun")
        stored, file_name, file_format, chosen = await self._store(content)
        now = utcnow()
        if rejecting and content.file_sha256 is not None:
            replayed = await self._refuse_duplicate(content, stored, tenant, created_by, key, now)
            if replayed is not None:
                return replayed
        total_rows = 0
        if self._rows_per_day is not None:
            try:
                total_rows = await self._rows_within_quota(
                    content, stored, file_format, chosen, tenant, created_by, now
                )
            except BaseException:
                await self._discard(content, stored)
                raise
        record = OperationRecord(
            id=uuid.uuid4(),
            operation_name=definition.name,
            status=OperationStatus.PENDING,
            created_by=(created_by or "").strip() or ANONYMOUS,
            created_at=now,
            source=self._service_name,
            file_id=stored.file_id,
            file_name=file_name,
            file_size=stored.size,
            file_format=file_format,
            metadata=content.metadata,
            notifications=notification_options,
            column_map=content.columns,
            schema_version=definition.controls.schema_version,
            tenant=tenant,
            dry_run=dry,
            source_operation_id=None if content.source is None else content.source.id,
            sheet=chosen,
            priority=rank,
            file_sha256=content.file_sha256,
            total_rows=total_rows,
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
            await self._discard(content, stored)
            raise
        if isinstance(used, LimitReached):
            await self._discard(content, stored)
            raise self._limit_refusal(record, used)
        if used is not None:
            await self._discard(content, stored)
            return await self._replay(used, fingerprint.hexdigest())
        self._work.enqueue(record.id)
        return Created(record)

    def _from_upload(
        self,
        operation_name: str | None,
        metadata: str | None,
        upload: Upload | None,
        column_map: str | None,
        sheet: str | None,
    ) -> _Content:
        checked = self._check(operation_name, metadata, upload)
        definition = checked.definition
        columns = parse_column_map(definition, column_map)
        chosen = self._sheet(checked.fmt, sheet)
        stored_metadata = dump_metadata(checked.metadata)
        fingerprint = Fingerprint(
            definition.name, stored_metadata, columns if chosen is None else [columns, chosen]
        )
        return _Content(definition, stored_metadata, columns, fingerprint, checked, chosen)

    async def _from_source(
        self,
        source_operation_id: str,
        operation_name: str | None,
        metadata: str | None,
        column_map: str | None,
        tenant: str | None,
        upload: Upload | None,
        sheet: str | None,
    ) -> _Content:
        # Cross-field rules, answered as an invalid submission.
        if upload is not None:
            raise _invalid_file("Send either a file or sourceOperationId, not both")
        source = await self._source(source_operation_id, tenant)
        if sheet is not None and sheet.strip():
            raise _invalid_file(
                "The sheet field applies to an uploaded file: a run from an earlier "
                "operation reads the worksheet that operation read"
            )
        definition = self._definition(operation_name or source.operation_name)
        if definition.name != source.operation_name:
            raise BadRequest(
                f"Operation {definition.name!r} cannot run from operation {source.id}, "
                f"which is of operation {source.operation_name!r}"
            )
        given = metadata if metadata and metadata.strip() else None
        parsed = self._metadata(definition, given or json.dumps(source.metadata))
        columns = (
            parse_column_map(definition, column_map)
            if column_map is not None and column_map.strip()
            else source.column_map
        )
        stored_metadata = dump_metadata(parsed)
        fingerprint = Fingerprint(definition.name, stored_metadata, columns)
        fingerprint.include(f"source:{source.id}")
        return _Content(definition, stored_metadata, columns, fingerprint, source)

    async def _store(self, content: _Content) -> tuple[StoredFile, str, str, str | None]:
        """The file of the new operation, its display name and format, and the worksheet
        it reads (None: its first, or not XLSX): the upload, stored now
        (hashed into the fingerprint as it streams), or the source's stored file."""
        checked = content.origin
        if isinstance(checked, OperationRecord):
            stored = StoredFile(checked.file_id, checked.file_size)
            content.file_sha256 = checked.file_sha256
            return stored, checked.file_name, checked.file_format, checked.sheet
        digest = FileHash()
        chunks = digest.through(content.fingerprint.through(self._stream(checked.upload)))
        stored = await self._files.put(chunks)
        content.file_sha256 = digest.hexdigest()
        if stored.size == 0:
            await self._files.delete(stored.file_id)
            raise BadRequest("The uploaded file is empty")
        chosen = None
        if checked.fmt is FileFormat.XLSX:
            try:
                found = await self._workbook_sheet(stored.file_id, content.sheet)
            except BaseException:
                await self._files.delete(stored.file_id)
                raise
            chosen = found if content.sheet is not None else None
        return (
            stored,
            _display_name(checked.upload.file_name, checked.fmt),
            checked.fmt.value,
            chosen,
        )

    async def _discard(self, content: _Content, stored: StoredFile) -> None:
        """Delete the file stored for a create that stored no operation (a source's file is
        never deleted here)."""
        if content.source is None:
            await self._files.delete(stored.file_id)

    async def _source(self, text: str, tenant: str | None) -> OperationRecord:
        """The operation a create reads its file from (a caller with a tenant: only one of
        that tenant's, another's is not found)."""
        try:
            operation_id = uuid.UUID(text.strip())
        except ValueError:
            raise BadRequest(
                f"sourceOperationId must be an operation id (a UUID), got {text.strip()[:100]!r}"
            ) from None
        source = await self._operations.get(operation_id)
        if source is None or (tenant is not None and source.tenant != tenant):
            raise NotFound(f"Source operation {operation_id} not found")
        return source

    async def _rows_within_quota(
        self,
        content: _Content,
        stored: StoredFile,
        file_format: str,
        sheet: str | None,
        tenant: str | None,
        created_by: str | None,
        now: datetime,
    ) -> int:
        """The rows of the stored file, counted (0 when it cannot be read: its operation
        fails then), once the tenant's quota of rows per day is known to hold them.

        Raises:
            TooManyRequests: they would take the tenant past its quota.
        """
        assert self._rows_per_day is not None
        delimiter = content.definition.controls.csv_delimiter
        try:
            async with self._files.local_path(stored.file_id) as path:
                rows = await asyncio.to_thread(
                    partial(count_rows, limits=self._file_limits),
                    path,
                    FileFormat(file_format),
                    delimiter,
                    sheet,
                )
        except FileFormatError:
            rows = 0
        creator = (created_by or "").strip() or ANONYMOUS
        await self._rows_per_day.check(self._operations, tenant, creator, rows, now)
        return rows

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
        created_by: str | None = None,
        tenant: str | None = None,
        mapping: str | None = None,
        source_url: str | None = None,
    ) -> ValidationResult:
        """Check a submission without storing anything (an XLSX file's first worksheet,
        or the one ``sheet`` names; a workbook that cannot be read is a file error).
        ``created_by`` (who asks) is what ``current_row()`` tells ``validate_row``.
        ``duplicate_of``: the newest operation of the same name and ``tenant`` whose file
        had this file's hash. ``mapping`` and ``source_url`` as for ``create``.

        Raises:
            BadRequest: unknown or missing operation, missing file, a malformed column
                map (one that does not fit the operation is among the ``fileErrors``),
                ``sheet`` for a file that is not XLSX, or a sheet the workbook lacks.
            UnsupportedMediaType: the file is not CSV, JSON, JSON Lines or XLSX.
            PayloadTooLarge: the file exceeds the upload limit.
            BadGateway: the source URL could not be read.
        """
        if source_url is not None and source_url.strip():
            self._one_origin(upload, None)
            self._definition(operation_name)
            column_map = await self._mapped(operation_name, mapping, column_map, tenant)
            async with self._open_source(source_url) as fetched:
                return await self.validate(
                    operation_name=operation_name,
                    metadata=metadata,
                    upload=fetched,
                    column_map=column_map,
                    sheet=sheet,
                    created_by=created_by,
                    tenant=tenant,
                )
        column_map = await self._mapped(operation_name, mapping, column_map, tenant)
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
            digest = FileHash()
            async with self._spooled(digest.through(self._stream(checked_upload))) as path:
                await self._within_limits(path, fmt, definition, sheet)
                checked = await check_file(
                    definition,
                    path,
                    fmt,
                    parsed,
                    columns,
                    sheet,
                    created_by=(created_by or "").strip() or ANONYMOUS,
                )
            result.file_errors.extend(checked.errors)
            result.suggested_column_map = checked.suggested_column_map or None
            duplicate = await find_duplicate(
                self._operations, definition.name, tenant, digest.hexdigest()
            )
            result.duplicate_of = None if duplicate is None else duplicate.id
        result.valid = not (result.metadata_errors or result.file_errors)
        return result

    async def _mapped(
        self,
        operation_name: str | None,
        mapping: str | None,
        column_map: str | None,
        tenant: str | None,
    ) -> str | None:
        """The ``columnMap`` text a submission uses: the one given, or the saved mapping
        ``mapping`` names (as JSON).

        Raises:
            BadRequest: both given, an unknown mapping or operation.
        """
        if mapping is None or not mapping.strip():
            return column_map
        if column_map is not None and column_map.strip():
            raise BadRequest("Send either columnMap or mapping, not both")
        definition = self._definition(operation_name)
        saved = None
        if self._mappings is not None:
            saved = await self._mappings.find(definition.name, mapping.strip(), tenant)
        if saved is None:
            raise BadRequest(
                f"Unknown mapping {mapping.strip()[:200]!r} for operation {definition.name!r}"
            )
        return json.dumps(saved)

    async def _refuse_duplicate(
        self,
        content: _Content,
        stored: StoredFile,
        tenant: str | None,
        created_by: str | None,
        key: str | None,
        now: datetime,
    ) -> Created | None:
        """Raise Conflict (the new file deleted) when an operation of the same name and
        tenant already had this file's hash; but a request sent again under its
        ``Idempotency-Key`` is answered its replay (the operation its first answer created
        is what makes its file a duplicate now)."""
        sha = content.file_sha256
        if sha is None:  # pragma: no cover - set by every store
            return None
        if key is not None:
            owner = _principal(tenant, (created_by or "").strip() or ANONYMOUS)
            expires = now - timedelta(seconds=self._idempotency_ttl)
            fingerprint = content.fingerprint.hexdigest()
            earlier = await self._operations.key_in_use(
                IdempotencyKey(owner, key, fingerprint, expires)
            )
            if earlier is not None:
                await self._discard(content, stored)
                return await self._replay(earlier, fingerprint)
        duplicate = await find_duplicate(self._operations, content.definition.name, tenant, sha)
        if duplicate is None:
            return None
        await self._discard(content, stored)
        raise Conflict(
            f"This file was already submitted as operation {duplicate.id} "
            f"(created {duplicate.created_at.isoformat()}); rejectDuplicate is true",
            duplicateOf=str(duplicate.id),
        )

    def _one_origin(self, upload: Upload | None, source_operation_id: str | None) -> None:
        if upload is not None:
            raise BadRequest("Send either a file or sourceUrl, not both")
        if source_operation_id is not None and source_operation_id.strip():
            raise BadRequest("Send either sourceOperationId or sourceUrl, not both")

    @contextlib.asynccontextmanager
    async def _open_source(self, url: str) -> AsyncIterator[Upload]:
        """The file at ``url`` as an upload (its name: the URL's last segment).

        Raises:
            BadRequest: the URL is not one the service may read (nothing fetched).
            BadGateway: the source could not be read.
            PayloadTooLarge: the source declares more bytes than the upload limit.
        """
        if self._sources is None:
            raise BadRequest("sourceUrl is not read by this service")
        async with self._sources.open(url.strip(), self._max_upload_bytes) as fetched:
            yield Upload(fetched.file_name, fetched.content_type, fetched.chunks)

    async def _within_limits(
        self, path: Path, fmt: FileFormat, definition: OperationDefinition, sheet: str | None
    ) -> None:
        """Refuse a file that expands beyond the expanded-size limit or holds more rows
        than the rows limit (counted in full, decompressing at most up to the limit), as
        its operation would fail while its rows are counted.

        Raises:
            PayloadTooLarge: naming the limit (``limit``).
        """
        limits = self._file_limits
        compressed = fmt is FileFormat.XLSX or await asyncio.to_thread(_gzipped, path)
        if not limits.rows and not (compressed and limits.expanded_bytes):
            return
        delimiter = definition.controls.csv_delimiter
        try:
            await asyncio.to_thread(partial(count_rows, limits=limits), path, fmt, delimiter, sheet)
        except (ExpandedTooLarge, TooManyRows) as exc:
            raise PayloadTooLarge(str(exc), limit=exc.limit) from None
        except FileFormatError:
            pass  # the file's check tells what is wrong with it

    @contextlib.asynccontextmanager
    async def _spooled(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[Path]:
        handle, name = tempfile.mkstemp(prefix="bulkops-validate-")
        path = Path(name)
        try:
            with os.fdopen(handle, "wb") as out:
                async for chunk in chunks:
                    out.write(chunk)
            yield path
        finally:
            path.unlink(missing_ok=True)


def _gzipped(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(len(GZIP_MAGIC)) == GZIP_MAGIC


async def _gzip_only(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` as they are, refused (a file error) unless they start with gzip's magic."""
    head: bytes | None = b""
    async for chunk in chunks:
        if head is not None:
            head += chunk
            if len(head) < len(GZIP_MAGIC):
                continue
            if not head.startswith(GZIP_MAGIC):
                raise _invalid_file(corrupt_gzip_message("it does not start as gzip does"))
            chunk, head = head, None
        yield chunk
    if head:
        raise _invalid_file(corrupt_gzip_message("it is too short"))


def _key_owner(record: OperationRecord) -> str:
    """Whose ``Idempotency-Key`` it is: the creator, within its tenant. Two tenants may each
    have an "alice"; a key of one must never replay (and so reveal) the other's operation.
    A digest keeps the pair within the column's 200 characters."""
    return _principal(record.tenant, record.created_by)


def _principal(tenant: str | None, created_by: str) -> str:
    if tenant is None:
        return created_by
    pair = f"{tenant}\0{created_by}".encode()
    return "tenant:" + hashlib.sha256(pair).hexdigest()


def parse_flag(name: str, text: str | None) -> bool:
    """A true/false form field (absent: false).

    Raises:
        BadRequest: any other value.
    """
    if text is None:
        return False
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise BadRequest(f"{name} must be true or false, got {text.strip()[:100]!r}")


def _invalid_file(message: str) -> Unprocessable:
    return Unprocessable(message, valid=False, metadataErrors=[], fileErrors=[message])


def _invalid_metadata(errors: list[str]) -> Unprocessable:
    return Unprocessable("Metadata is invalid", valid=False, metadataErrors=errors, fileErrors=[])


def _display_name(file_name: str | None, fmt: FileFormat) -> str:
    # Only the last path component is kept, whatever separators the client used; the name
    # is shown and used as the download name, never as a storage path.
    base = (file_name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip().strip(".")
    return base[:255] or f"upload.{fmt.value}"
