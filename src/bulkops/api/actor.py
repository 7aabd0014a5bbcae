"""Who is asking: the ``actor`` a request's changes are attributed to in the event feed."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from bulkops.api.auth.principal import principal_of

__all__ = ["ANONYMOUS", "ActorDep", "request_actor"]

ANONYMOUS = "anonymous"  # a request with no authenticated principal


async def request_actor(request: Request) -> str:
    """The authenticated principal's name, or ``"anonymous"`` (no authentication)."""
    principal = principal_of(request)
    return principal.name if principal is not None else ANONYMOUS


ActorDep = Annotated[str, Depends(request_actor)]
