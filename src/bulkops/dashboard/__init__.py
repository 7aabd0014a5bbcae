"""The dashboard: a static page at ``/dashboard`` that drives the service through its HTTP API.

Mount it on any FastAPI app with one line::

    app.include_router(dashboard_router())
"""

from __future__ import annotations

from bulkops.dashboard.routes import dashboard_router

__all__ = ["dashboard_router"]
