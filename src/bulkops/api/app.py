"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from bulkops.api.errors import install_error_handlers
from bulkops.api.routes import bulks, events, export, health, retry, signals
from bulkops.api.routes import operations as discovery
from bulkops.definition.operation import OperationDefinition
from bulkops.runtime import Runtime, build_registry
from bulkops.settings import Settings

OPENAPI_URL = "/openapi/v1.json"


def create_app(
    operations: Sequence[type | OperationDefinition] | None = None,
    settings: Settings | None = None,
) -> FastAPI:
    """Build the bulkops ASGI app.

    Args:
        operations: Operation classes (decorated with ``@bulkops.operation``) to serve;
            default: those named in ``settings.operations``, else the built-in examples.
        settings: Configuration; default: read from ``BULKOPS_*`` environment variables.

    Returns:
        A FastAPI app. Its lifespan opens storage and, unless ``settings.role`` is
        ``"api"``, processes operations in the background.
    """
    settings = settings or Settings()
    registry = build_registry(operations, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.open(settings, registry, role=settings.role)
        app.state.runtime = runtime
        app.state.signals = runtime.signals  # the programmatic SignalService
        try:
            await runtime.start()
            yield
        finally:
            await runtime.close()

    app = FastAPI(
        title="bulkops",
        version="1",
        description="Upload a file of records and process every row in the background.",
        openapi_url=OPENAPI_URL if settings.openapi_enabled else None,
        docs_url="/docs" if settings.openapi_enabled else None,
        redoc_url=None,
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for routes in (discovery, bulks, export, retry, signals, events, health):
        app.include_router(routes.router)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_credentials=True,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Content-Disposition", "Location"],
        )
    return app
