"""Usage: ``GET /api/usage`` summed over every backend (each counts its own operations)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bulkops.gateway.backend import BackendFailure
from bulkops.gateway.errors import BackendUnavailable, Refusal, RelayedRefusal
from bulkops.gateway.forwarding import until_disconnect
from bulkops.gateway.gateway import gateway_of

router = APIRouter(include_in_schema=False)

_COUNTS = ("operationsCreated", "rowsSubmitted", "rowsProcessed", "bytesStored")


@router.get("/api/usage")
async def get_usage(request: Request) -> JSONResponse:
    """Each backend's use by tenant and day, added up per tenant and day.

    A backend that does not answer contributes nothing; a refusal (401, 403, 400) is
    relayed when no backend accepted the request.
    """
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    answered: list[dict[str, Any]] = []
    refusals: list[Refusal] = []
    for backend in gateway.backends.values():
        outgoing = backend.request(
            "GET", "/api/usage", headers=headers, params=dict(request.query_params)
        )
        try:
            upstream = await until_disconnect(request, backend.send(outgoing))
        except BackendFailure:
            continue
        if upstream.status_code == 200:
            answered.append(upstream.json())
        elif 400 <= upstream.status_code < 500:
            refusals.append(Refusal(upstream.status_code, upstream.json()))
    if not answered and refusals:
        raise RelayedRefusal(refusals[0])
    if not answered and gateway.backends:
        raise BackendUnavailable("No backend answered the usage request")
    return JSONResponse(merge(answered))


def merge(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """The backends' usage answers as one: the counts of a tenant and day added up, newest
    day first, then by tenant."""
    days: dict[tuple[str, str | None], dict[str, Any]] = {}
    for answer in answers:
        for item in answer.get("items", []):
            key = (item["day"], item.get("tenant"))
            merged = days.setdefault(key, {**item, **{name: 0 for name in _COUNTS}})
            for name in _COUNTS:
                merged[name] += item.get(name, 0)
    ordered = sorted(days.items(), key=lambda pair: pair[0][1] or "")
    ordered.sort(key=lambda pair: pair[0][0], reverse=True)
    days_covered = max((answer.get("days", 0) for answer in answers), default=30)
    return {"days": days_covered, "items": [item for _, item in ordered]}
