"""HTTP routes of the dashboard: the page at ``/dashboard`` (and its deep links) and its files."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from bulkops.dashboard.assets import STATIC_DIR, Page, collect_assets, render_page

# The page's URLs: everything else under /dashboard is a 404, not a blank page.
PAGE_PATHS = (
    "/dashboard",
    "/dashboard/",
    "/dashboard/new",
    "/dashboard/events",
    "/dashboard/usage",
)
OPERATION_PAGE_PATH = "/dashboard/bulks/{id}"

# Browsers revalidate (cheap with the ETag) so an upgraded service never runs stale scripts.
_REVALIDATE = "no-cache"


def _base(request: Request) -> str:
    """The URL prefix the app is mounted under (set by a proxy or a parent app)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def dashboard_router() -> APIRouter:
    """The dashboard's routes, ready for ``app.include_router(dashboard_router())``.

    The page is a static single-page app that calls only the public HTTP API (``/api/...``)
    of the app that serves it, so it works the same on an instance and on the gateway, and
    against a secured service (the page asks for a token when the API answers 401). The
    routes are left out of the API description: they are not part of the API.

    Returns:
        A router serving ``/`` (a redirect to ``/dashboard``), ``/dashboard``,
        ``/dashboard/new``, ``/dashboard/events``, ``/dashboard/bulks/{id}`` and the page's
        files under ``/dashboard/assets/``.
    """
    assets = collect_assets()
    pages: dict[str, Page] = {}  # by URL prefix; an app is rarely reached under more than one
    router = APIRouter(include_in_schema=False)

    async def page(request: Request) -> HTMLResponse:
        base = _base(request)
        rendered = pages.get(base)
        if rendered is None:
            rendered = pages.setdefault(base, render_page(base, STATIC_DIR))
        return HTMLResponse(
            rendered.body,
            headers={
                "Cache-Control": _REVALIDATE,
                "Content-Security-Policy": rendered.content_security_policy,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "same-origin",
            },
        )

    @router.get("/")
    async def root(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{_base(request)}/dashboard", status_code=307)

    for path in PAGE_PATHS:
        router.add_api_route(path, page, methods=["GET"], response_class=HTMLResponse)

    @router.get(OPERATION_PAGE_PATH, response_class=HTMLResponse)
    async def operation_page(id: str, request: Request) -> HTMLResponse:
        return await page(request)

    @router.get("/dashboard/assets/{name:path}")
    async def asset(name: str, request: Request) -> Response:
        found = assets.get(name)
        if found is None:
            # The API's error body, without importing the API: the API mounts the dashboard.
            return JSONResponse({"error": f"No dashboard file {name!r}"}, status_code=404)
        headers = {"ETag": found.etag, "Cache-Control": _REVALIDATE}
        if request.headers.get("if-none-match") == found.etag:
            return Response(status_code=304, headers=headers)
        return FileResponse(found.path, media_type=found.media_type, headers=headers)

    return router
