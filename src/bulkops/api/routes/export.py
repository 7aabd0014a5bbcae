"""Export: GET /api/bulks/{id}/export streams an operation's rows as CSV, JSON, JSON Lines or
XLSX."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from bulkops.api.deps import OperationId, RuntimeDep
from bulkops.api.download import content_disposition, primed
from bulkops.api.schemas import error_responses
from bulkops.service.export import MEDIA_TYPES

router = APIRouter(prefix="/api/bulks", tags=["bulks"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The export file, streamed",
        "content": {media.split(";", 1)[0]: {} for media in MEDIA_TYPES.values()},
    },
    **error_responses(404, 409),
}


@router.get(
    "/{id}/export",
    operation_id="exportBulk",
    response_class=StreamingResponse,
    responses=_RESPONSES,
)
async def export_bulk(
    operation_id: OperationId,
    runtime: RuntimeDep,
    mode: Annotated[
        str | None,
        Query(
            description=(
                "`report` (default) or `data` (needs TrackRowData), in any case "
                "(surrounding spaces ignored)"
            ),
            json_schema_extra={"enum": ["report", "data"]},
        ),
    ] = None,
    file_format: Annotated[
        str | None,
        Query(
            alias="format",
            description=(
                "`csv` (default), `json`, `jsonl` or `xlsx`, in any case "
                "(surrounding spaces ignored)"
            ),
            json_schema_extra={"enum": ["csv", "json", "jsonl", "xlsx"]},
        ),
    ] = None,
    state: Annotated[str | None, Query(description="Row state; unknown ignored")] = None,
    error_type: Annotated[
        str | None, Query(alias="errorType", description="Error type; unknown ignored")
    ] = None,
    step_name: Annotated[
        str | None, Query(alias="stepName", description="Exact name of the row's current step")
    ] = None,
) -> StreamingResponse:
    """Download every row record (report) or the original rows with their outcome (data).

    Rows come by row number and the file is streamed as it is read, so exports of any size
    run in flat memory. Request errors are answered before the first byte.
    """
    export = await runtime.exports.export(
        operation_id,
        mode=mode,
        file_format=file_format,
        state=state,
        error_type=error_type,
        step_name=step_name,
    )
    return StreamingResponse(
        await primed(export.chunks),
        media_type=export.media_type,
        headers={"Content-Disposition": content_disposition(export.file_name)},
    )
