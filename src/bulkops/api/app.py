"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from bulkops.api.admission import ReadAdmission, ReadAdmissionMiddleware
from bulkops.api.auth import AccessControl, UserResolver
from bulkops.api.auth.middleware import OPENAPI_URL, AccessMiddleware
from bulkops.api.deps import operation_in_scope
from bulkops.api.errors import install_error_handlers
from bulkops.api.openapi import install_openapi
from bulkops.api.request_metrics import RequestMetricsMiddleware
from bulkops.api.routes import (
    actions,
    bulks,
    caller,
    events,
    export,
    health,
    notifications,
    retry,
    signals,
    undo,
    usage,
)
from bulkops.api.routes import mappings as saved_mappings
from bulkops.api.routes import metrics as metrics_routes
from bulkops.api.routes import operations as discovery
from bulkops.dashboard import dashboard_router
from bulkops.definition.operation import OperationDefinition
from bulkops.observability.metrics import Metrics
from bulkops.runtime import Runtime, build_registry
from bulkops.settings import Settings
from bulkops.sources.base import Resolver
from bulkops.supervisor import WorkerProcesses


def create_app(
    operations: Sequence[type | OperationDefinition] | None = None,
    settings: Settings | None = None,
    *,
    user_resolver: UserResolver | None = None,
    processes: WorkerProcesses | None = None,
    source_resolver: Resolver | None = None,
) -> FastAPI:
    """Build the bulkops ASGI app.

    Args:
        operations: Operation classes (decorated with ``@bulkops.operation``) to serve;
            default: those named in ``settings.operations``, else the built-in examples.
        settings: Configuration; default: read from ``BULKOPS_*`` environment variables.
        user_resolver: ``resolver(request) -> str | None`` (may be async) naming the
            creator (``createdBy``) of an operation; default: the authenticated
            principal's name (token name, or the JWT's ``sub`` / ``preferred_username`` /
            ``name``). ``bulkops.api.auth.principal_of(request)`` gives the principal.
        processes: Worker processes that process the operations instead of this process
            (``bulkops serve``): the app's lifespan starts them after opening storage and
            stops them before closing it.
        source_resolver: ``async resolver(host, port) -> [address, ...]`` resolving the
            host names of ``sourceUrl``s; default: the system's resolver.

    Returns:
        A FastAPI app. Its lifespan opens storage and, unless ``settings.role`` is
        ``"api"`` or ``processes`` are given, processes operations in the background.

    Raises:
        AuthConfigurationError: A custom policy (``BULKOPS_*_POLICY``) or the tenant
            resolver (``BULKOPS_TENANT_RESOLVER``) cannot be loaded.
    """
    settings = settings or Settings()
    registry = build_registry(operations, settings)
    access = AccessControl.from_settings(settings, user_resolver=user_resolver)
    metrics = Metrics()
    admission = ReadAdmission()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.open(
            settings,
            registry,
            role=settings.role if processes is None else "api",
            metrics=metrics,
            local_wakeups=None if processes is None else processes.wakeups,
            source_resolver=source_resolver,
        )
        app.state.runtime = runtime
        app.state.signals = runtime.signals  # the programmatic SignalService
        # Processing elsewhere never counts as active here: reads are not held back.
        admission.watch(runtime.processing_active)
        try:
            await runtime.start()
            if processes is not None:
                metrics.include(processes.metrics_directory)
                await processes.start()
            yield
        finally:
            if processes is not None:
                await processes.stop()
            await runtime.close()
            await access.aclose()

    app = FastAPI(
        title="bulkops",
        version="1",
        description="Upload a file of records and process every row in the background.",
        openapi_url=OPENAPI_URL if settings.openapi_enabled else None,
        docs_url="/docs" if settings.openapi_enabled else None,
        redoc_url=None,
        lifespan=lifespan,
        # Tenants: every route of one operation, present and future, is scoped here.
        dependencies=[Depends(operation_in_scope)],
    )
    app.state.access = access
    app.state.admission = admission
    install_error_handlers(app)
    routes_in_order = (
        discovery,
        saved_mappings,
        bulks,
        notifications,
        export,
        retry,
        undo,
        signals,
        events,
        caller,
        usage,
        health,
        actions,
    )
    for routes in (*routes_in_order, metrics_routes):
        app.include_router(routes.router)
    app.include_router(dashboard_router())
    install_openapi(app, registry, access)
    if access.enabled:
        app.add_middleware(AccessMiddleware, access=access)
    # Reads wait for their turn while processing is active (``api.admission``); inside the
    # request metrics, so a read's wait counts in its latency.
    app.add_middleware(ReadAdmissionMiddleware, admission=admission)
    # Outside access control, so refused requests (401, 403) are counted too.
    app.add_middleware(RequestMetricsMiddleware, metrics=metrics)
    if settings.cors_origins:
        # Added last, so it wraps access control: preflights and 401s carry CORS headers.
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
