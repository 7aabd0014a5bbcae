"""The caller's tenant: named by its credential, else by a tenant resolver.

A principal with a tenant sees and changes only that tenant's operations; one without (and
anonymous use with no credential configured) sees every operation. A resolver that fails
therefore refuses the request (500) instead of answering as if there were no tenant.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from bulkops.api.auth.principal import Principal, principal_of
from bulkops.errors import ServiceError

log = logging.getLogger("bulkops.auth")

# Key of the caller's tenant, once found, in the ASGI scope's request state.
TENANT_KEY = "bulkops.tenant"
# Distinct resolver failures logged per process: each is logged once, not per request.
_MAX_LOGGED = 100

TenantResolver = Callable[[Principal | None, Request], Any]
"""``resolver(principal, request)`` returns (or, when async, resolves to) the caller's
tenant, or None for a caller that sees every tenant. ``principal`` is the caller a bearer
credential proved, else None."""


class TenantUnknown(ServiceError):
    """The tenant resolver failed, so the request cannot be scoped (500)."""

    status_code = 500


class Tenancy:
    """Finds the tenant of each request, once per request.

    The credential decides first (a static token's ``tenant``, the JWT's tenant claim);
    the resolver, when configured, names the tenant of callers whose credential names
    none.

    Args:
        resolver: The tenant resolver (``BULKOPS_TENANT_RESOLVER``), if any.
        name: How the resolver is named in messages.
    """

    def __init__(self, resolver: TenantResolver | None = None, name: str | None = None) -> None:
        self._resolver = resolver
        self._name = name or getattr(resolver, "__qualname__", "the tenant resolver")
        self._logged: set[str] = set()

    async def tenant_of(self, request: Request) -> str | None:
        """The caller's tenant, or None when it sees every tenant.

        Raises:
            TenantUnknown: The resolver raised or answered something other than a
                non-empty string or None.
        """
        state = request.scope.setdefault("state", {})
        if TENANT_KEY in state:
            found: str | None = state[TENANT_KEY]
            return found
        principal = principal_of(request)
        tenant = principal.tenant if principal is not None else None
        if tenant is None and self._resolver is not None:
            tenant = await self._resolve(principal, request)
        state[TENANT_KEY] = tenant
        return tenant

    async def _resolve(self, principal: Principal | None, request: Request) -> str | None:
        try:
            answer = self._resolver(principal, request)  # type: ignore[misc]
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            self._log_once(f"raised {type(exc).__name__}: {exc}", exc)
            raise self._refusal() from None
        if answer is None:
            return None
        if not isinstance(answer, str) or not answer.strip():
            self._log_once(f"returned {answer!r}, which is neither a non-empty string nor None")
            raise self._refusal()
        return answer.strip()

    def _log_once(self, problem: str, exc: BaseException | None = None) -> None:
        if problem in self._logged:
            log.debug("The tenant resolver %s %s (again)", self._name, problem)
            return
        if len(self._logged) < _MAX_LOGGED:
            self._logged.add(problem)
        log.error(
            "The tenant resolver %s (BULKOPS_TENANT_RESOLVER) %s; requests that need the "
            "caller's tenant are refused with 500 until it is fixed",
            self._name,
            problem,
            exc_info=exc,
        )

    def _refusal(self) -> TenantUnknown:
        return TenantUnknown(
            "Cannot tell the caller's tenant: the tenant resolver (BULKOPS_TENANT_RESOLVER) "
            "failed; see the service log"
        )
