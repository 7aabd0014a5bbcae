"""One error body for every failure: ``{"error": "..."}`` plus optional machine fields."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from bulkops.errors import ServiceError, StorageError

log = logging.getLogger("bulkops.api")


def error_response(status_code: int, message: str, **extra: Any) -> JSONResponse:
    """A JSON error answer."""
    body: dict[str, Any] = {"error": message}
    body.update({key: value for key, value in extra.items() if value is not None})
    return JSONResponse(body, status_code=status_code)


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
        return error_response(exc.status_code, exc.message, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, _describe_request_errors(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "Request failed"
        return error_response(exc.status_code, message)

    @app.exception_handler(StorageError)
    async def storage_error(request: Request, exc: StorageError) -> JSONResponse:
        log.error("Storage failure on %s %s: %s", request.method, request.url.path, exc)
        return error_response(503, "Storage is unavailable; try again later")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("Unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "Internal server error")
