"""The gateway's ASGI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response

from bulkops.api.auth.middleware import OPENAPI_URL
from bulkops.api.errors import error_response, install_error_handlers
from bulkops.api.request_metrics import RequestMetricsMiddleware
from bulkops.dashboard import dashboard_router
from bulkops.gateway.backend import Backend, BackendFailure, OutgoingHook
from bulkops.gateway.errors import RelayedRefusal
from bulkops.gateway.fanout import fan_out
from bulkops.gateway.forwarding import CallerGone
from bulkops.gateway.gateway import Gateway, gateway_of
from bulkops.gateway.openapi import gateway_description
from bulkops.gateway.registry import DuplicateOperationError
from bulkops.gateway.routes import actions, bulks, events, health, metrics, operations, usage
from bulkops.gateway.routes.forwarded import forwarded_routes
from bulkops.gateway.settings import GatewaySettings, parse_backends

log = logging.getLogger("bulkops.gateway")

CLIENT_CLOSED_REQUEST = 499  # the caller left before the answer (a proxy convention)
HTTP_UNAUTHORIZED = 401


def create_gateway(
    backends: Mapping[str, str | None] | Sequence[str] | None = None,
    settings: GatewaySettings | None = None,
    outgoing: Sequence[OutgoingHook] = (),
) -> FastAPI:
    """Build the gateway: one address over several bulkops services.

    Args:
        backends: Backend names and URLs (``{"eu": "http://eu:8000"}``; a name mapped to None
            is reached at ``http://NAME``); default: ``settings.backends``.
        settings: Configuration; default: read from ``BULKOPS_GATEWAY_*`` variables.
        outgoing: Hooks called with every backend request (``httpx.Request``) and the
            backend's name before retries and the circuit breaker, e.g. to set a credential.

    Returns:
        A FastAPI app with the routes, verbs and answers of an instance, plus
        ``sourceService`` on descriptors and ``source`` on the list. Its lifespan discovers
        every backend's operations and raises ``DuplicateOperationError`` when two backends
        serve the same name.
    """
    settings = settings or GatewaySettings()
    if backends is not None:
        settings = settings.model_copy(update={"backends": parse_backends(backends)})
    gateway = Gateway(settings, outgoing)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            await gateway.start()
        except DuplicateOperationError as exc:
            log.error("The gateway cannot start: %s", exc)
            await gateway.close()
            raise
        try:
            yield
        finally:
            await gateway.close()

    app = FastAPI(
        title="bulkops gateway",
        openapi_url=None,  # the instance's own description is served instead, see below
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    install_error_handlers(app)
    _install_gateway_errors(app)
    for routes in (health, metrics, operations, bulks, events, usage, actions):
        app.include_router(routes.router)
    app.router.routes.extend(forwarded_routes())
    if settings.openapi_enabled:
        _serve_description(app)
    # The dashboard calls only the public HTTP API, which this app serves for every backend.
    app.include_router(dashboard_router())
    app.add_middleware(RequestMetricsMiddleware, metrics=gateway.metrics)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_credentials=True,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=[
                "Content-Disposition",
                "Location",
                "Idempotent-Replayed",
                "Retry-After",
            ],
        )
    return app


def _install_gateway_errors(app: FastAPI) -> None:
    @app.exception_handler(BackendFailure)
    async def backend_failure(request: Request, exc: BackendFailure) -> JSONResponse:
        return error_response(exc.status_code, f"Backend {exc.backend!r} {exc.reason}")

    @app.exception_handler(RelayedRefusal)
    async def relayed(request: Request, exc: RelayedRefusal) -> JSONResponse:
        # A merged answer relays one backend's 401 with the challenge the backends send.
        status = exc.refusal.status_code
        headers = {"WWW-Authenticate": "Bearer"} if status == HTTP_UNAUTHORIZED else None
        return JSONResponse(exc.refusal.body, status_code=status, headers=headers)

    @app.exception_handler(CallerGone)
    async def caller_gone(request: Request, exc: CallerGone) -> Response:
        log.info(
            "Caller left %s %s; its backend calls were cancelled", request.method, request.url.path
        )
        return Response(status_code=CLIENT_CLOSED_REQUEST)


def _serve_description(app: FastAPI) -> None:
    @app.get(OPENAPI_URL, include_in_schema=False)
    async def openapi_document(request: Request) -> JSONResponse:
        # The forms offer the operations the backends serve now, read from their own
        # descriptions (a backend that does not answer contributes none).
        gateway = gateway_of(request)
        headers = gateway.headers_for(request)

        async def description(backend: Backend) -> dict[str, Any]:
            status, body = await backend.get_json(OPENAPI_URL, headers=headers)
            if status != 200 or not isinstance(body, dict):
                raise ValueError(f"its description answered {status}")
            return body

        answers = await fan_out(
            list(gateway.backends.values()),
            description,
            gateway.settings.fan_out_timeout_per_backend,
        )
        documents = [answer.value for answer in answers if answer.value is not None]
        return JSONResponse(gateway_description(documents))

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=OPENAPI_URL, title="bulkops gateway")
