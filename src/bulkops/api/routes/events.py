"""Event feeds: GET /api/events and GET /api/bulks/{id}/events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from bulkops.api.deps import Limit, OperationId, RuntimeDep, Since, TenantDep
from bulkops.api.schemas import EventSchema, error_responses

router = APIRouter(tags=["events"])

Actor = Annotated[
    str | None,
    Query(
        description="Only the events this actor caused (a principal's name, "
        '"anonymous" or "system")'
    ),
]


@router.get("/api/events", operation_id="getEvents", response_model=list[EventSchema])
async def get_events(
    runtime: RuntimeDep,
    tenant: TenantDep,
    since: Since = None,
    limit: Limit = None,
    actor: Actor = None,
) -> list[EventSchema]:
    """Events across operations after the ``since`` cursor, oldest first (a caller with a
    tenant: only its tenant's operations'); with ``actor``, only those it caused."""
    events = await runtime.feed.read(since=since, limit=limit, tenant=tenant, actor=actor)
    return [EventSchema.from_record(e) for e in events]


@router.get(
    "/api/bulks/{id}/events",
    operation_id="getBulkEvents",
    response_model=list[EventSchema],
    responses=error_responses(404),
)
async def get_bulk_events(
    operation_id: OperationId,
    runtime: RuntimeDep,
    tenant: TenantDep,
    since: Since = None,
    limit: Limit = None,
    actor: Actor = None,
) -> list[EventSchema]:
    """Events of one operation after the ``since`` cursor, oldest first; with ``actor``,
    only those it caused."""
    events = await runtime.feed.read(
        since=since, limit=limit, operation_id=operation_id, tenant=tenant, actor=actor
    )
    return [EventSchema.from_record(e) for e in events]
