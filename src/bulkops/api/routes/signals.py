"""Signals: POST /api/bulks/{id}/signal/{key} and /signal/{key}/fail."""

from __future__ import annotations

from fastapi import APIRouter, Request

from bulkops.api.actor import ActorDep
from bulkops.api.deps import OperationId, RuntimeDep
from bulkops.api.schemas import SignalFailureRequest, SignalResultSchema, error_responses
from bulkops.errors import BadRequest

router = APIRouter(prefix="/api/bulks/{id}/signal", tags=["signals"])


@router.post(
    "/{key}",
    operation_id="signalStep",
    response_model=SignalResultSchema,
    responses=error_responses(404),
)
async def signal_step(
    operation_id: OperationId, key: str, runtime: RuntimeDep, actor: ActorDep
) -> SignalResultSchema:
    """Complete the waiting step of the row that started waiting first under ``key``."""
    result = await runtime.signals.signal(operation_id, key, succeeded=True, actor=actor)
    return SignalResultSchema.of(result)


@router.post(
    "/{key}/fail",
    operation_id="failStep",
    response_model=SignalResultSchema,
    responses=error_responses(400, 404),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": SignalFailureRequest.model_json_schema(by_alias=True)
                }
            },
        }
    },
)
async def fail_step(
    operation_id: OperationId,
    key: str,
    request: Request,
    runtime: RuntimeDep,
    actor: ActorDep,
) -> SignalResultSchema:
    """Fail the waiting step of that row with ``errorMessage`` (kept up to 2,000 chars)."""
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest('Body must be JSON: {"errorMessage": "..."}') from None
    message = body.get("errorMessage") if isinstance(body, dict) else None
    result = await runtime.signals.signal(
        operation_id, key, succeeded=False, error_message=message, actor=actor
    )
    return SignalResultSchema.of(result)
