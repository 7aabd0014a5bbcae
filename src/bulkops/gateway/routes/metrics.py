"""``GET /metrics``: the gateway's own Prometheus metrics (each backend serves its own)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from bulkops.gateway.backend import BackendFailure
from bulkops.gateway.errors import Refusal, RelayedRefusal
from bulkops.gateway.gateway import gateway_of
from bulkops.gateway.metrics import CONTENT_TYPE
from bulkops.gateway.registry import REFUSED

router = APIRouter(include_in_schema=False)

# Asked of a backend to learn whether the caller may read: every backend knows the same
# credentials, and this route is the cheapest that needs the read access ``/metrics`` needs.
CALLER_PATH = "/api/me"


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Requests by route and status, latency, and each backend's circuit state.

    The caller needs what a backend's ``/metrics`` needs: the first backend that answers
    judges its credentials (a 401 or 403 is relayed). With no backend answering the
    metrics are served, since they are what tells why.
    """
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    for backend in gateway.backends.values():
        try:
            status, body = await backend.get_json(CALLER_PATH, headers=headers)
        except BackendFailure:
            continue
        if status in REFUSED:
            raise RelayedRefusal(Refusal(status, body))
        break
    return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)
