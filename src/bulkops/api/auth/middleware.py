"""The ASGI middleware that guards every route by default."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from bulkops.api.auth.control import AccessControl
from bulkops.api.auth.principal import STATE_KEY, Access
from bulkops.api.errors import service_error_response
from bulkops.errors import ServiceError

OPENAPI_URL = "/openapi/v1.json"
# Paths that never ask for a credential: health checks (probes carry none), the API
# description and its docs page, and the dashboard's static files (the page asks for a
# token when the API answers 401). Everything else is guarded, including routes added
# later, so a new route cannot be left open by mistake.
OPEN_EXACT = frozenset({"/", OPENAPI_URL})
OPEN_TREES = ("/health", "/docs", "/dashboard")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Reads that need operate access all the same: every tenant's use is an operator's matter.
OPERATE_READS = frozenset({"/api/usage"})


def required_access(method: str, path: str) -> Access | None:
    """What a request needs: None for open paths, READ for safe methods, else OPERATE."""
    if path in OPEN_EXACT or any(path == t or path.startswith(t + "/") for t in OPEN_TREES):
        return None
    if path in OPERATE_READS:
        return Access.OPERATE
    return Access.READ if method.upper() in SAFE_METHODS else Access.OPERATE


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


class AccessMiddleware:
    """Authorizes each HTTP request before routing; refused requests never reach a route.

    The authenticated principal is left in the request state (``principal_of(request)``)
    for attribution.
    """

    def __init__(self, app: ASGIApp, access: AccessControl) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401/403 (or 503 without JWKS keys) or pass the request on."""
        if scope["type"] == "http":
            needed = required_access(scope["method"], _route_path(scope))
            if needed is not None and self.access.guards(needed):
                try:
                    principal = await self.access.authorize(Request(scope), needed)
                except ServiceError as exc:
                    await service_error_response(exc)(scope, receive, send)
                    return
                scope.setdefault("state", {})[STATE_KEY] = principal
        await self.app(scope, receive, send)
