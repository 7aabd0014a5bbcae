"""Reading the multipart form of create and validate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from bulkops.errors import BadRequest, PayloadTooLarge, StorageError
from bulkops.service.submission import Upload

_CHUNK = 1024 * 1024
# Fields other than the file (metadata, notifications, columnMap) are held in memory.
MAX_FIELD_BYTES = 1024 * 1024
# Room for the other form fields and multipart framing around the file.
_FORM_OVERHEAD = 1024 * 1024


@dataclass(slots=True)
class SubmissionForm:
    """The fields of a create or validate request."""

    operation_name: str | None
    metadata: str | None
    notifications: str | None
    created_by: str | None
    column_map: str | None
    upload: Upload | None
    sheet: str | None = None
    dry_run: str | None = None
    source_operation_id: str | None = None
    priority: str | None = None
    reject_duplicate: str | None = None
    mapping: str | None = None
    source_url: str | None = None


async def _chunks(file: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await file.read(_CHUNK):
        yield chunk


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


async def read_form(request: Request, max_upload_bytes: int) -> tuple[SubmissionForm, FormData]:
    """Parse the form (files spool to disk, never whole in memory). Close the returned
    ``FormData`` when done with the upload."""
    declared = request.headers.get("content-length", "")
    if (
        max_upload_bytes
        and declared.isdigit()
        and int(declared) > max_upload_bytes + _FORM_OVERHEAD
    ):
        raise PayloadTooLarge(
            f"File exceeds the upload limit of {max_upload_bytes} bytes", limit=max_upload_bytes
        )
    content_type = request.headers.get("content-type", "")
    # A form without a file (sourceUrl, sourceOperationId) may come url-encoded too.
    if not content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        raise BadRequest("Expected a multipart/form-data body with a 'file' part")
    try:
        form = await request.form(max_files=1, max_fields=32, max_part_size=MAX_FIELD_BYTES)
    except (MultiPartException, HTTPException) as exc:
        # Starlette reports a multipart fault as an HTTPException(400) inside an app.
        if "maximum size" in str(getattr(exc, "detail", exc)):
            raise PayloadTooLarge(
                f"A form field exceeds the limit of {MAX_FIELD_BYTES // 1024} KiB "
                "(only the file part may be larger)",
                limit=MAX_FIELD_BYTES,
            ) from None
        raise BadRequest(f"Malformed multipart body: {getattr(exc, 'detail', exc)}") from None
    except OSError as exc:  # the spooled file part could not be written (disk full)
        raise StorageError(f"Could not spool the upload: {exc.strerror or exc}") from None
    except Exception as exc:  # starlette raises its own errors for malformed bodies
        raise BadRequest(f"Malformed multipart body: {exc}") from None
    file = form.get("file")
    upload = None
    # A form whose file input was left empty sends a nameless, empty part: no file at all.
    if isinstance(file, UploadFile) and (file.filename or file.size):
        upload = Upload(
            file_name=file.filename,
            content_type=file.content_type,
            chunks=_chunks(file),
        )
    return (
        SubmissionForm(
            operation_name=_text(form, "operationName"),
            metadata=_text(form, "metadata"),
            notifications=_text(form, "notifications"),
            created_by=_text(form, "createdBy"),
            column_map=_text(form, "columnMap"),
            upload=upload,
            sheet=_text(form, "sheet"),
            dry_run=_text(form, "dryRun"),
            source_operation_id=_text(form, "sourceOperationId"),
            priority=_text(form, "priority"),
            reject_duplicate=_text(form, "rejectDuplicate"),
            mapping=_text(form, "mapping"),
            source_url=_text(form, "sourceUrl"),
        ),
        form,
    )
