"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from bulkops.api.deps import RuntimeDep
from bulkops.api.schemas import HealthSchema
from bulkops.errors import StorageError

router = APIRouter(prefix="/health", tags=["health"])


@router.get(
    "/live",
    operation_id="getLiveness",
    response_model=HealthSchema,
    response_model_exclude_none=True,
)
async def live() -> dict[str, str]:
    """The process is up; runs no checks."""
    return {"status": "Healthy"}


@router.get(
    "/ready",
    operation_id="getReadiness",
    response_model=HealthSchema,
    responses={503: {"model": HealthSchema, "description": "Storage is unreachable"}},
)
async def ready(runtime: RuntimeDep) -> JSONResponse:
    """Storage is reachable: 200 Healthy, else 503 Unhealthy."""
    try:
        await runtime.stores.operations.ping()
    except StorageError as exc:
        return JSONResponse(
            {
                "status": "Unhealthy",
                "checks": {"storage": {"status": "Unhealthy", "error": str(exc)}},
            },
            status_code=503,
        )
    return JSONResponse({"status": "Healthy", "checks": {"storage": {"status": "Healthy"}}})
