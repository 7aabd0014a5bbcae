"""Liveness (no checks) and readiness (the ``bulk-backends`` check)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bulkops.gateway.gateway import gateway_of
from bulkops.gateway.health import check_backends

router = APIRouter(prefix="/health", include_in_schema=False)


@router.get("/live")
async def live() -> JSONResponse:
    """The gateway is up. Runs no checks, so an unreachable backend never restarts it."""
    return JSONResponse({"status": "Healthy"})


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    """200 Healthy or Degraded, 503 Unhealthy (no backend ready, or none configured)."""
    gateway = gateway_of(request)
    status, body = await check_backends(
        list(gateway.backends.values()), gateway.settings.fan_out_timeout_per_backend
    )
    return JSONResponse(body, status_code=status)
