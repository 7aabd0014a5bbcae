"""Prometheus metrics of this process (read policy)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from bulkops.api.deps import RuntimeDep
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
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus text: rows by operation and outcome, operations by status, queue depth,
    row, step and storage-write latency, signals, HTTP requests."""
    statuses = await runtime.stores.operations.status_counts()
    return Response(runtime.metrics.render(statuses), media_type=CONTENT_TYPE)
