"""Tenant resolvers (BULKOPS_TENANT_RESOLVER) for the tenant tests."""

from __future__ import annotations

from starlette.requests import Request

from bulkops.api.auth import Principal

CALLS: list[str | None] = []


def by_header(principal: Principal | None, request: Request) -> str | None:
    """The tenant an ``X-Tenant`` header names (a gateway or proxy that knows would set it)."""
    return request.headers.get("x-tenant")


async def by_name(principal: Principal | None, request: Request) -> str | None:
    """An async directory look-up by the principal's name."""
    CALLS.append(principal.name if principal else None)
    return {"carol": "initech"}.get(principal.name) if principal else None


def raising(principal: Principal | None, request: Request) -> str | None:
    """A directory that is down."""
    raise ConnectionError("the tenant directory is unreachable")


def not_a_string(principal: Principal | None, request: Request) -> object:
    """A resolver with a bug: a number is no tenant."""
    return 42


NOT_CALLABLE = "acme"
