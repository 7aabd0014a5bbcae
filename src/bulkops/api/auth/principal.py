"""Who is calling, and what a request needs: the principal and the two access levels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from starlette.requests import HTTPConnection

# Key of the authenticated principal in the ASGI scope's request state.
STATE_KEY = "bulkops.principal"


class Access(StrEnum):
    """What a request does to the service."""

    READ = "read"  # GET routes: discovery, lists, details, downloads, feeds
    OPERATE = "operate"  # create, validate, cancel, retry, signal; implies READ


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    Attributes:
        name: The caller's name; the default ``createdBy`` of what it creates.
        grants: The access levels its credential carries (operate implies read).
        kind: Which credential proved it: ``token`` (static bearer token) or ``jwt``.
        claims: The verified JWT claims (empty for static tokens).
        tenant: The tenant its credential names (a static token's ``tenant``, the JWT's
            tenant claim), or None. See ``AccessControl.tenant_of`` for the caller's
            tenant, which a tenant resolver may also decide.
    """

    name: str
    grants: frozenset[Access]
    kind: str
    claims: Mapping[str, Any] = field(default_factory=dict)
    tenant: str | None = None

    def may(self, access: Access) -> bool:
        """Whether the credential allows ``access``."""
        return access in self.grants or Access.OPERATE in self.grants


def principal_of(connection: HTTPConnection) -> Principal | None:
    """The principal authenticated for this request, or None (anonymous or no policy).

    Custom policies and user resolvers get the request; this reads the caller from it.
    """
    state = connection.scope.get("state") or {}
    principal = state.get(STATE_KEY)
    return principal if isinstance(principal, Principal) else None
