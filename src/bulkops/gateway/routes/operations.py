"""Discovery: ``GET /api/operations`` merged over every backend, with ``sourceService``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bulkops.gateway.errors import BackendUnavailable, RelayedRefusal
from bulkops.gateway.forwarding import until_disconnect
from bulkops.gateway.gateway import gateway_of

router = APIRouter(include_in_schema=False)


@router.get("/api/operations")
async def get_operations(request: Request) -> JSONResponse:
    """Every backend's operations, each marked with the backend that serves it.

    A backend that does not answer contributes nothing; its operations stay routable.
    """
    gateway = gateway_of(request)
    discovery = await until_disconnect(
        request, gateway.registry.discover(gateway.headers_for(request))
    )
    if not discovery.answered and discovery.refusals:
        raise RelayedRefusal(discovery.refusals[0])
    if not discovery.answered and gateway.backends:
        raise BackendUnavailable("No backend answered the discovery request")
    return JSONResponse(gateway.registry.descriptors(discovery.answered))
