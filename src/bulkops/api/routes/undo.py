"""Undo: undo what a finished operation's rows did, or preview it."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bulkops.api.deps import AccessDep, OperationId, RuntimeDep
from bulkops.api.schemas import OperationSchema, Schema, error_responses
from bulkops.errors import BadRequest

router = APIRouter(prefix="/api/bulks/{id}/undo", tags=["undo"])

BODY_HINT = 'The body is optional; when sent it must be JSON: {"preview": true}'


class UndoRequest(Schema):
    """The body of ``POST /api/bulks/{id}/undo`` (optional)."""

    preview: bool = False


class UndoPreviewSchema(Schema):
    """What an undo would do: the rows it would run and their row-steps to undo (a row of
    a row or batch operation counts one step)."""

    rows: int
    steps: int


async def _preview(request: Request) -> bool:
    raw = await request.body()
    if not raw.strip():
        return False
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadRequest(BODY_HINT) from None
    if not isinstance(body, dict):
        raise BadRequest(BODY_HINT)
    preview = body.get("preview", False)
    if not isinstance(preview, bool):
        raise BadRequest("preview must be true or false")
    return preview


@router.post(
    "",
    operation_id="undoBulk",
    status_code=201,
    response_model=OperationSchema,
    response_model_exclude_none=True,
    responses={
        200: {"model": UndoPreviewSchema, "description": "The preview (preview: true)"},
        **error_responses(400, 404, 409, 429),
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {
                "application/json": {"schema": UndoRequest.model_json_schema(by_alias=True)}
            },
        }
    },
)
async def undo_bulk(
    operation_id: OperationId, request: Request, runtime: RuntimeDep, access: AccessDep
) -> JSONResponse:
    """Undo what a finished operation's rows did: 201 with the new undo operation (its
    ``undoOf`` names this one, whose ``undoneBy`` names it), which runs, for each row
    that completed a step with an undo, the undos of its completed steps in reverse
    order with the row's data as it was run. ``{"preview": true}``: 200 with the rows
    and row-steps it would undo, nothing started. 409 with the reason when the operation
    is not finished, defines no undo, or was already undone (naming that undo)."""
    if await _preview(request):
        counted = await runtime.undos.preview(operation_id)
        body = UndoPreviewSchema(rows=counted.rows, steps=counted.steps)
        return JSONResponse(body.model_dump(by_alias=True))
    record = await runtime.undos.undo(operation_id, await access.created_by(request, None))
    detail = OperationSchema.from_record(record).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return JSONResponse(detail, status_code=201, headers={"Location": f"/api/bulks/{record.id}"})
