"""Every other instance route, forwarded as it is: routes of one operation (``{id}``) to the
backend that owns it, routes of one operation definition (``{name}``) to the backend that
serves it.

The routes are taken from the instance's own API description, so a route an instance gains
later is forwarded without a change here.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bulkops.errors import NotFound, PayloadTooLarge
from bulkops.gateway.backend import Backend, BackendFailure
from bulkops.gateway.errors import BackendUnavailable
from bulkops.gateway.forwarding import relay, target_of, until_disconnect
from bulkops.gateway.gateway import gateway_of
from bulkops.gateway.openapi import instance_routes

# Bodies of id routes are small JSON objects (row numbers, a failure message).
MAX_BODY_BYTES = 1024 * 1024
OPERATION_ROUTES = "/api/bulks/{id}"
DEFINITION_ROUTES = "/api/operations/{name}"
# The route about the caller (not in the description: the dashboard's): every backend
# knows the same credentials, so the first that answers says.
CALLER_ROUTE = "/api/me"


async def _small_body(request: Request) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"Request body exceeds {MAX_BODY_BYTES} bytes")
    return bytes(body)


Headers = list[tuple[str, str]]


async def _forward(request: Request, owner: Callable[[Headers], Awaitable[Backend]]) -> Response:
    headers = gateway_of(request).headers_for(request)
    body = await _small_body(request)

    async def exchange() -> httpx.Response:
        backend = await owner(headers)
        outgoing = backend.request(
            request.method, target_of(request), headers=headers, content=body or None
        )
        return await backend.send(outgoing, stream=True)

    return await relay(await until_disconnect(request, exchange()))


async def forward_by_id(request: Request) -> Response:
    """A route of one operation: sent to the backend that owns the operation."""
    raw = request.path_params["id"]
    try:
        operation_id = str(uuid.UUID(raw))
    except ValueError:
        raise NotFound(f"Operation {raw} not found") from None
    locator = gateway_of(request).locator
    return await _forward(request, lambda headers: locator.owner(operation_id, headers))


async def forward_by_name(request: Request) -> Response:
    """A route of one operation definition: sent to the backend that serves it."""
    name = request.path_params["name"]
    gateway = gateway_of(request)

    async def owner(headers: Headers) -> Backend:
        found = gateway.registry.owner(name) or await gateway.registry.rediscover_for(name, headers)
        if found is None:
            raise NotFound(f"Unknown operation {name!r}")
        return found

    return await _forward(request, owner)


async def forward_to_any(request: Request) -> Response:
    """A route about the caller: sent to the first backend that answers."""
    gateway = gateway_of(request)
    headers = gateway.headers_for(request)
    failures = []
    for backend in gateway.backends.values():
        outgoing = backend.request(request.method, target_of(request), headers=headers)
        try:
            upstream = await until_disconnect(request, backend.send(outgoing, stream=True))
        except BackendFailure as exc:
            failures.append(f"{exc.backend} {exc.reason}")
            continue
        return await relay(upstream)
    raise BackendUnavailable("No backend answered: " + ("; ".join(failures) or "none configured"))


def forwarded_routes() -> list[Route]:
    """A forwarding route for every instance route of one operation or one definition, and
    for the caller route."""
    routes = []
    for path, methods in instance_routes():
        if path.startswith(OPERATION_ROUTES):
            routes.append(Route(path, forward_by_id, methods=methods, include_in_schema=False))
        elif path.startswith(DEFINITION_ROUTES):
            routes.append(Route(path, forward_by_name, methods=methods, include_in_schema=False))
    routes.append(Route(CALLER_ROUTE, forward_to_any, methods=["GET"], include_in_schema=False))
    return routes
