"""``/api/bulks``: the merged list, and create/validate routed by operation name."""

from __future__ import annotations

import contextlib
import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from bulkops.errors import BadRequest
from bulkops.gateway.forwarding import relay, target_of, until_disconnect
from bulkops.gateway.gateway import Gateway, gateway_of
from bulkops.gateway.uploads import read_upload
from bulkops.service.queries import clamp_paging

log = logging.getLogger("bulkops.gateway")

router = APIRouter(prefix="/api/bulks", include_in_schema=False)

_PAGING = ("page", "pageSize", "source")


@router.get("")
async def get_bulks(
    request: Request,
    page: Annotated[int | None, Query()] = None,
    page_size: Annotated[int | None, Query(alias="pageSize")] = None,
    source: Annotated[str | None, Query()] = None,
) -> Response:
    """Operations of every backend, newest first; with ``source`` one backend's, natively.

    Every other query parameter (filters) is passed on to the backends as it is.
    """
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    if source:
        backend = gateway.backend_named(source)
        if backend is not None:
            params = [(k, v) for k, v in request.query_params.multi_items() if k != "source"]
            outgoing = backend.request("GET", "/api/bulks", params=params, headers=headers)
            return await relay(await until_disconnect(request, backend.send(outgoing, stream=True)))
        log.warning(
            "List source %r names no backend (backends: %s); listing every backend instead",
            source,
            ", ".join(gateway.backends) or "none",
        )
    number, size = clamp_paging(page, page_size)
    filters = [(k, v) for k, v in request.query_params.multi_items() if k not in _PAGING]
    body = await until_disconnect(request, gateway.listing.page(number, size, filters, headers))
    return JSONResponse(body)


@router.post("")
async def create_bulk(request: Request) -> Response:
    """Create: passed to the backend serving the form's ``operationName``."""
    return await _submit(gateway_of(request), request, remember=True)


@router.post("/validate")
async def validate_bulk(request: Request) -> Response:
    """Validate: passed to the backend serving the form's ``operationName``."""
    return await _submit(gateway_of(request), request, remember=False)


async def _submit(gateway: Gateway, request: Request, *, remember: bool) -> Response:
    headers = gateway.headers_for(request)
    upload = await read_upload(request)
    try:
        name = (upload.operation_name or "").strip()
        if not name:
            raise BadRequest("operationName is required")
        # A name not discovered yet is asked for again before the 400.
        backend = gateway.registry.owner(name) or await gateway.registry.rediscover_for(
            name, headers, always=True
        )
        if backend is None:
            raise BadRequest(f"Unknown operation {name!r}")
        outgoing = backend.request(
            "POST", target_of(request), headers=[*headers, *upload.headers], content=upload.body()
        )
        upstream = await backend.send(outgoing, stream=True)
    finally:
        upload.close()
    answer = await relay(upstream)
    if remember and upstream.status_code == 201 and upstream.is_stream_consumed:
        with contextlib.suppress(ValueError, AttributeError):  # not the expected body: no cache
            gateway.cache.put(str(upstream.json()["operationId"]), backend.name)
    return answer
