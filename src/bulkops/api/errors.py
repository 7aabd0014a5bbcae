"""One error body for every failure: ``{"error": "..."}`` plus optional machine fields."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from bulkops.api.auth.errors import NotAuthenticated
from bulkops.errors import ServiceError, StorageError, StorageFull, TooManyRequests

log = logging.getLogger("bulkops.api")


def error_response(
    status_code: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A JSON error answer; ``extra`` adds machine fields to the body."""
    body: dict[str, Any] = {"error": message}
    body.update({key: value for key, value in extra.items() if value is not None})
    return JSONResponse(body, status_code=status_code, headers=headers)


def service_error_response(exc: ServiceError) -> JSONResponse:
    """The answer to a refused request; a 401 carries its ``WWW-Authenticate`` challenge, a
    429 its ``Retry-After``."""
    headers = None
    if isinstance(exc, NotAuthenticated):
        headers = {"WWW-Authenticate": exc.challenge}
    elif isinstance(exc, TooManyRequests):
        headers = {"Retry-After": str(exc.retry_after)}
    return error_response(exc.status_code, exc.message, headers=headers, **exc.extra)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> str:
    """The ``Allow`` value for the request's path: every method some route answers there.

    Starlette names only the methods of the first route that matched the path, but a path
    such as ``/api/bulks`` has a GET route and a POST route. Each method is tried against
    the router (``BaseRoute.matches``), which also sees into included routers.
    """
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]
    return ", ".join(allowed)


def _describe_request_errors(exc: RequestValidationError) -> str:
    parts = []
    for item in exc.errors():
        location = ".".join(str(p) for p in item.get("loc", ()) if p not in ("query", "path"))
        parts.append(f"{location}: {item.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Map service errors, request errors and unexpected failures to the error body."""

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return service_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, _describe_request_errors(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "Request failed"
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request)  # RFC 9110: a 405 lists them
        return error_response(exc.status_code, message, headers=headers or None)

    @app.exception_handler(StorageError)
    async def storage_error(request: Request, exc: StorageError) -> JSONResponse:
        log.error("Storage failure on %s %s: %s", request.method, request.url.path, exc)
        if isinstance(exc, StorageFull):
            return error_response(507, "Storage is full; nothing was stored: try again later")
        return error_response(503, "Storage is unavailable; try again later")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("Unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "Internal server error")
