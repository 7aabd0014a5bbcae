"""Counting HTTP requests by route template, status and latency (an ASGI middleware)."""

from __future__ import annotations

import time
from typing import Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Requests no route saw (unknown paths, and those access control refused before routing):
# one label for all, not one per path.
UNROUTED = "unrouted"


class RequestRecorder(Protocol):
    """Where requests are counted: the service's ``Metrics``, or the gateway's."""

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request and its latency."""


class RequestMetricsMiddleware:
    """Times every HTTP request and records it under its route's template
    (``/api/bulks/{id}/status``), so the label set stays bounded."""

    def __init__(self, app: ASGIApp, metrics: RequestRecorder) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on and record its status and latency."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path_format", None) or UNROUTED
            self.metrics.request(scope["method"], template, status, time.perf_counter() - started)
