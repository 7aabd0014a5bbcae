"""Prometheus metrics of this process, and of its worker processes for serve (read policy)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from bulkops.api.deps import RuntimeDep, TenantDep
from bulkops.api.schemas import error_responses
from bulkops.observability.metrics import CONTENT_TYPE

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    operation_id="getMetrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **error_responses(503),
    },
)
async def metrics(runtime: RuntimeDep, tenant: TenantDep) -> Response:
    """Prometheus text: rows by operation and outcome, operations by status, queue depth,
    row, step and storage-write latency, signals, HTTP requests.

    A caller with a tenant reads its own tenant's operation counts and queue depth, and
    no series labelled with another tenant.
    """
    statuses = await runtime.stores.operations.status_counts(tenant)
    return Response(runtime.metrics.render(statuses, tenant), media_type=CONTENT_TYPE)
