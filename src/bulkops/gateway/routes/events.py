"""The global event feed, merged over every backend (see ``bulkops.gateway.feed``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bulkops.gateway.forwarding import until_disconnect
from bulkops.gateway.gateway import gateway_of

router = APIRouter(include_in_schema=False)

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@router.get("/api/events")
async def get_events(
    request: Request,
    since: int | None = None,
    limit: int | None = None,
    actor: str | None = None,
) -> JSONResponse:
    """Events of every backend after the gateway cursor ``since``, oldest first; without
    ``since`` the newest ``limit`` (default 100, at most 1000). With ``actor``, those of
    them that actor caused (filtered here: the merged cursor stays every backend's)."""
    gateway = gateway_of(request)
    size = DEFAULT_LIMIT if limit is None else min(max(limit, 1), MAX_LIMIT)
    events = await until_disconnect(
        request, gateway.feed.read(since, size, gateway.headers_for(request))
    )
    if actor:
        events = [event for event in events if event.get("actor", "system") == actor]
    return JSONResponse(events)
