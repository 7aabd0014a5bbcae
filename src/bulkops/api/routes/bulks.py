"""Operations: create, validate, list, detail, status, errors, rows, file, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from bulkops.api.actor import ActorDep
from bulkops.api.deps import (
    INT32_MAX,
    INT32_MIN,
    AccessDep,
    After,
    IsoDateTime,
    OperationId,
    Page,
    PageSize,
    RowNumber,
    RuntimeDep,
    TenantDep,
)
from bulkops.api.download import content_disposition, primed
from bulkops.api.schemas import (
    CreateResult,
    FixRowErrorSchema,
    FixRowRequest,
    OperationSchema,
    PageSchema,
    RowErrorSchema,
    RowPageSchema,
    RowProgressSchema,
    StatusSchema,
    ValidationResultSchema,
    error_responses,
)
from bulkops.api.uploads import read_form
from bulkops.errors import BadRequest
from bulkops.service.duplicates import parse_sha256
from bulkops.service.queries import clamp_paging
from bulkops.storage.records import OperationQuery
from bulkops.storage.states import OperationStatus

router = APIRouter(prefix="/api/bulks", tags=["bulks"])

_ERRORS = error_responses(404)


# The multipart request bodies of create and validate depend on the registered operations:
# bulkops.api.openapi describes them.
@router.post(
    "",
    operation_id="createBulk",
    status_code=201,
    response_model=CreateResult,
    responses={
        **error_responses(400, 404, 409, 413, 415, 429, 502),
        422: {"model": ValidationResultSchema, "description": "Metadata is invalid"},
    },
)
async def create_bulk(
    request: Request, runtime: RuntimeDep, access: AccessDep, tenant: TenantDep
) -> JSONResponse:
    """Store the file and a Pending operation; processing happens in the background.

    The creator is the authenticated caller (through the user resolver); the ``createdBy``
    form value counts only when no policy is configured. The caller's tenant is stamped
    on the operation; 429 (with ``Retry-After``) when the tenant already has
    ``BULKOPS_TENANT_MAX_ACTIVE`` operations Pending, Running or Retrying.
    """
    form, raw = await read_form(request, runtime.settings.max_upload_bytes)
    try:
        created = await runtime.submissions.create(
            operation_name=form.operation_name,
            metadata=form.metadata,
            upload=form.upload,
            notifications=form.notifications,
            created_by=await access.created_by(request, form.created_by),
            column_map=form.column_map,
            idempotency_key=request.headers.get("idempotency-key"),
            tenant=tenant,
            sheet=form.sheet,
            dry_run=form.dry_run,
            source_operation_id=form.source_operation_id,
            priority=form.priority,
            reject_duplicate=form.reject_duplicate,
            mapping=form.mapping,
            source_url=form.source_url,
        )
    finally:
        await raw.close()
    headers = {"Location": f"/api/bulks/{created.record.id}"}
    if created.replayed:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse({"operationId": str(created.record.id)}, status_code=201, headers=headers)


@router.post(
    "/validate",
    operation_id="validateBulk",
    response_model=ValidationResultSchema,
    responses={
        **error_responses(400, 413, 415, 502),
        422: {"model": ValidationResultSchema, "description": "The submission is invalid"},
    },
)
async def validate_bulk(
    request: Request, runtime: RuntimeDep, access: AccessDep, tenant: TenantDep
) -> JSONResponse:
    """Check a submission without creating anything: 200 when valid, 422 when not. The
    caller, named as a create would record it, is ``created_by`` in ``current_row()``."""
    form, raw = await read_form(request, runtime.settings.max_upload_bytes)
    try:
        result = await runtime.submissions.validate(
            operation_name=form.operation_name,
            metadata=form.metadata,
            upload=form.upload,
            column_map=form.column_map,
            sheet=form.sheet,
            created_by=await access.created_by(request, form.created_by),
            tenant=tenant,
            mapping=form.mapping,
            source_url=form.source_url,
        )
    finally:
        await raw.close()
    body = ValidationResultSchema.from_record(result).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    return JSONResponse(body, status_code=200 if result.valid else 422)


@router.get(
    "",
    operation_id="getBulks",
    response_model=PageSchema[OperationSchema],
    response_model_exclude_none=True,
)
async def get_bulks(
    runtime: RuntimeDep,
    tenant: TenantDep,
    page: Page = None,
    page_size: PageSize = None,
    operation_name: Annotated[str | None, Query(alias="operationName")] = None,
    status: str | None = None,
    created_by: Annotated[str | None, Query(alias="createdBy")] = None,
    created_from: Annotated[IsoDateTime | None, Query(alias="from")] = None,
    created_to: Annotated[IsoDateTime | None, Query(alias="to")] = None,
    file_sha256: Annotated[
        str | None,
        Query(
            alias="fileSha256",
            description="SHA-256 of the stored file, 64 hex digits",
            json_schema_extra={"pattern": r"^\s*([0-9A-Fa-f]{64})?\s*$"},
        ),
    ] = None,
) -> PageSchema[OperationSchema]:
    """Operations, newest first (a caller with a tenant: only that tenant's). An unknown
    ``status`` is ignored; ``fileSha256`` (64 hex digits) keeps operations whose stored
    file has that SHA-256."""
    number, size = clamp_paging(page, page_size)
    result = await runtime.queries.list(
        OperationQuery(
            page=number,
            page_size=size,
            operation_name=operation_name or None,
            status=OperationStatus.parse(status) if status else None,
            created_by=created_by or None,
            created_from=created_from,
            created_to=created_to,
            tenant=tenant,
            file_sha256=parse_sha256(file_sha256),
        )
    )
    return PageSchema.build(result, [OperationSchema.from_record(r) for r in result.items])


@router.get(
    "/{id:bulk_id}",
    operation_id="getBulk",
    response_model=OperationSchema,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def get_bulk(operation_id: OperationId, runtime: RuntimeDep) -> OperationSchema:
    """One operation."""
    return OperationSchema.from_record(await runtime.queries.get(operation_id))


@router.get(
    "/{id}/status",
    operation_id="getBulkStatus",
    response_model=StatusSchema,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def get_bulk_status(operation_id: OperationId, runtime: RuntimeDep) -> StatusSchema:
    """Status and whole-number progress percentage."""
    return StatusSchema.from_record(await runtime.queries.status(operation_id))


@router.get(
    "/{id}/errors",
    operation_id="getBulkErrors",
    response_model=RowPageSchema[RowErrorSchema],
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def get_bulk_errors(
    operation_id: OperationId,
    runtime: RuntimeDep,
    page: Page = None,
    page_size: PageSize = None,
    error_type: Annotated[str | None, Query(alias="errorType")] = None,
    row_number: RowNumber = None,
    after: After = None,
) -> RowPageSchema[RowErrorSchema]:
    """Failed rows by row number. An unknown ``errorType`` is ignored."""
    result = await runtime.queries.errors(
        operation_id,
        page=page,
        page_size=page_size,
        error_type=error_type,
        row_number=row_number,
        after=after,
    )
    fixed = await runtime.queries.fixed_among(operation_id, result.items)
    originals = await runtime.queries.originals_among(operation_id, result.items, fixed)
    items = [
        RowErrorSchema.of(r, r.row_number in fixed, original=originals.get(r.row_number))
        for r in result.items
    ]
    return RowPageSchema.of_rows(result, items)


@router.get(
    "/{id}/rows",
    operation_id="getBulkRows",
    response_model=RowPageSchema[RowProgressSchema],
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def get_bulk_rows(
    operation_id: OperationId,
    runtime: RuntimeDep,
    page: Page = None,
    page_size: PageSize = None,
    state: str | None = None,
    step_name: Annotated[str | None, Query(alias="stepName")] = None,
    after: After = None,
) -> RowPageSchema[RowProgressSchema]:
    """Per-row progress with the state of every step."""
    record = await runtime.queries.get(operation_id)
    definition = runtime.registry.get(record.operation_name)
    result = await runtime.queries.rows(
        operation_id,
        page=page,
        page_size=page_size,
        state=state,
        step_name=step_name,
        after=after,
    )
    fixed = await runtime.queries.fixed_among(operation_id, result.items)
    items = [RowProgressSchema.of(r, definition, r.row_number in fixed) for r in result.items]
    return RowPageSchema.of_rows(result, items)


@router.patch(
    "/{id}/rows/{rowNumber}",
    operation_id="fixBulkRow",
    response_model=RowErrorSchema,
    response_model_exclude_none=True,
    responses={
        **error_responses(400, 404, 409),
        422: {"model": FixRowErrorSchema, "description": "The new data is invalid"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": FixRowRequest.model_json_schema(by_alias=True)}
            },
        }
    },
)
async def fix_bulk_row(
    operation_id: OperationId,
    row_number: Annotated[int, Path(alias="rowNumber", ge=INT32_MIN, le=INT32_MAX)],
    request: Request,
    runtime: RuntimeDep,
    actor: ActorDep,
) -> RowErrorSchema:
    """Fix a Failed row of a finished operation that keeps row data: its new data (the
    whole row, by the file's column names) is validated at once and used by the next
    retry, which runs it again whatever it failed at. 422 with ``errors`` when the data
    does not fit (nothing changed); 409 with the reason when the row cannot be fixed.
    Data equal to the row's current data changes nothing: 200 with ``unchanged: true``
    and ``fixed`` as it was."""
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest(_FIX_BODY) from None
    data = body.get("rowData") if isinstance(body, dict) else None
    if not isinstance(data, dict):
        raise BadRequest(_FIX_BODY)
    outcome = await runtime.fixes.fix(operation_id, row_number, data, actor=actor)
    originals = await runtime.queries.originals_among(operation_id, [outcome.row])
    answer = RowErrorSchema.of(outcome.row, fixed=outcome.fixed, original=originals.get(row_number))
    answer.unchanged = True if outcome.unchanged else None
    return answer


_FIX_BODY = 'Body must be JSON: {"rowData": {"column": "value", ...}}'


@router.get(
    "/{id}/file",
    operation_id="getBulkFile",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}}, **_ERRORS},
)
async def get_bulk_file(operation_id: OperationId, runtime: RuntimeDep) -> StreamingResponse:
    """The original file, under its original name."""
    record, chunks = await runtime.queries.file(operation_id)
    return StreamingResponse(
        await primed(chunks),
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": content_disposition(record.file_name),
            "Content-Length": str(record.file_size),
        },
    )


@router.post(
    "/{id}/cancel",
    operation_id="cancelBulk",
    response_model=StatusSchema,
    responses=error_responses(404, 409),
    response_model_exclude_none=True,
)
async def cancel_bulk(
    operation_id: OperationId, runtime: RuntimeDep, actor: ActorDep
) -> StatusSchema:
    """Cancel a Pending, Running or Retrying operation; 409 when already finished."""
    await runtime.commands.cancel(operation_id, actor=actor)
    return StatusSchema.from_record(await runtime.queries.status(operation_id))
