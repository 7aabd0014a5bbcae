"""The HTTP API (FastAPI): routes, wire schemas, error bodies."""

from __future__ import annotations

from bulkops.api.app import create_app

__all__ = ["create_app"]
