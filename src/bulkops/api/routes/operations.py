"""Discovery and templates: GET /api/operations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from bulkops.api.deps import RuntimeDep
from bulkops.api.download import content_disposition
from bulkops.api.schemas import OperationDescriptor, error_responses
from bulkops.formats.base import XLSX_MEDIA_TYPE

router = APIRouter(prefix="/api/operations", tags=["operations"])


@router.get(
    "",
    operation_id="getOperations",
    response_model=list[OperationDescriptor],
    response_model_exclude_none=True,
    response_model_by_alias=True,
)
async def get_operations(runtime: RuntimeDep) -> list[OperationDescriptor]:
    """Registered operations and the input each one takes."""
    return [OperationDescriptor.of(d) for d in runtime.catalog.operations()]


@router.get(
    "/{name}/template",
    operation_id="getOperationTemplate",
    response_class=Response,
    responses={
        200: {"content": {"text/csv": {}, XLSX_MEDIA_TYPE: {}}},
        **error_responses(400, 404),
    },
)
async def get_operation_template(
    name: str,
    runtime: RuntimeDep,
    file_format: Annotated[
        str | None,
        Query(
            alias="format",
            description="`csv` (default) or `xlsx`, in any case (surrounding spaces ignored)",
            json_schema_extra={"enum": ["csv", "xlsx"]},
        ),
    ] = None,
) -> Response:
    """A CSV file (or an XLSX workbook) holding the header row of the operation's file
    columns."""
    content, file_name, media_type = runtime.catalog.template_file(name, file_format)
    return Response(
        content,
        media_type=media_type,
        headers={"Content-Disposition": content_disposition(file_name)},
    )
