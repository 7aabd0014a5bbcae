"""The notification deliveries of an operation."""

from __future__ import annotations

from fastapi import APIRouter

from bulkops.api.deps import OperationId, RuntimeDep
from bulkops.api.schemas import DeliverySchema, error_responses

router = APIRouter(prefix="/api/bulks", tags=["bulks"])


@router.get(
    "/{id}/notifications",
    operation_id="getBulkNotifications",
    response_model=list[DeliverySchema],
    responses=error_responses(404),
    response_model_exclude_none=True,
)
async def get_bulk_notifications(
    operation_id: OperationId, runtime: RuntimeDep
) -> list[DeliverySchema]:
    """Each notification delivery of the operation (outbox order) and how it went:
    Pending (with its next attempt), Delivered, or Failed (given up)."""
    found = await runtime.queries.notifications(operation_id)
    return [DeliverySchema.from_record(delivery) for delivery in found]
