"""Discovery and templates: GET /api/operations."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from bulkops.api.deps import RuntimeDep
from bulkops.api.download import content_disposition
from bulkops.api.schemas import OperationDescriptor, error_responses

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
    responses={200: {"content": {"text/csv": {}}}, **error_responses(404)},
)
async def get_operation_template(name: str, runtime: RuntimeDep) -> Response:
    """A CSV file holding the header row of the operation's file columns."""
    text, file_name = runtime.catalog.template(name)
    return Response(
        text,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": content_disposition(file_name)},
    )
