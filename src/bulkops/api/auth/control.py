"""Access control of one app: authentication, the read and operate policies, attribution."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request

from bulkops.api.auth.errors import NotAuthenticated, PermissionDenied
from bulkops.api.auth.policies import (
    Policy,
    evaluate,
    grant_policy,
    load_callable,
    load_policy,
)
from bulkops.api.auth.principal import Access, Principal, principal_of
from bulkops.api.auth.tenants import Tenancy
from bulkops.api.auth.tokens import StaticTokens
from bulkops.settings import Settings

if TYPE_CHECKING:
    from bulkops.api.auth.jwt_bearer import JwtVerifier

log = logging.getLogger("bulkops.auth")

UserResolver = Callable[[Request], str | Awaitable[str | None] | None]
"""``resolver(request)`` names the creator of an operation (``createdBy``); None falls
back to the authenticated principal's name. ``principal_of(request)`` gives the caller."""


def bearer_token(authorization: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer <token>`` header; None for no header
    or another scheme, ``""`` for a Bearer header without a token."""
    if not authorization:
        return None
    scheme, _, credential = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credential.strip()


class AccessControl:
    """Decides, per request, who is calling and whether it may read or operate.

    Policies per access level:

    - read: ``BULKOPS_READ_POLICY`` if set, else the credential's grant when bearer
      credentials (static tokens or JWT) are configured, else none (open).
    - operate: ``BULKOPS_OPERATE_POLICY`` if set, else the credential's grant when bearer
      credentials are configured, else the read policy (SPEC: operate falls back to read).

    With no policy at all nothing is checked and ``enabled`` is False.

    Args:
        tokens: Static bearer tokens, if configured.
        verifier: The JWT verifier, if configured.
        read_policy: A custom read policy, replacing the built-in grant check.
        operate_policy: A custom operate policy, replacing the built-in grant check.
        user_resolver: Names the creator of an operation from the request.
        tenancy: Finds the caller's tenant (default: the credential's tenant alone).
    """

    def __init__(
        self,
        *,
        tokens: StaticTokens | None = None,
        verifier: JwtVerifier | None = None,
        read_policy: Policy | None = None,
        operate_policy: Policy | None = None,
        user_resolver: UserResolver | None = None,
        tenancy: Tenancy | None = None,
    ) -> None:
        self._tokens = tokens if tokens else None
        self.tenancy = tenancy or Tenancy()
        self._verifier = verifier
        self._user_resolver = user_resolver
        bearer = self.bearer
        self._policies: dict[Access, Policy | None] = {
            Access.READ: read_policy or (grant_policy(Access.READ) if bearer else None),
            Access.OPERATE: operate_policy
            or (grant_policy(Access.OPERATE) if bearer else read_policy),
        }

    @classmethod
    def from_settings(
        cls, settings: Settings, *, user_resolver: UserResolver | None = None
    ) -> AccessControl:
        """Build from the ``BULKOPS_AUTH_*`` and ``BULKOPS_*_POLICY`` settings.

        Raises:
            AuthConfigurationError: A custom policy or the tenant resolver cannot be imported.
        """
        resolver = settings.tenant_resolver
        return cls(
            tokens=StaticTokens(settings.auth_tokens) if settings.auth_tokens else None,
            verifier=_jwt_verifier(settings),
            read_policy=load_policy(settings.read_policy) if settings.read_policy else None,
            operate_policy=(
                load_policy(settings.operate_policy) if settings.operate_policy else None
            ),
            user_resolver=user_resolver,
            tenancy=Tenancy(
                load_callable(resolver, "tenant resolver") if resolver else None, resolver
            ),
        )

    @property
    def bearer(self) -> bool:
        """Whether bearer credentials (static tokens or JWT) are configured."""
        return self._tokens is not None or self._verifier is not None

    @property
    def enabled(self) -> bool:
        """Whether any policy is in force (False: no checks at all)."""
        return any(policy is not None for policy in self._policies.values())

    def guards(self, access: Access) -> bool:
        """Whether requests needing ``access`` are checked by a policy."""
        return self._policies[access] is not None

    async def authenticate(self, request: Request) -> Principal | None:
        """The caller a bearer credential proves; None when none came (or none is
        configured, leaving the request to the policies).

        Raises:
            NotAuthenticated: A bearer credential came and is not valid.
        """
        token = bearer_token(request.headers.get("authorization"))
        if token is None or not self.bearer:
            return None
        if self._tokens is not None and (principal := self._tokens.authenticate(token)):
            return principal
        if self._verifier is not None and token.count(".") == 2:
            return await self._verifier.authenticate(token)
        raise NotAuthenticated("Invalid bearer token", invalid_token=True)

    async def authorize(self, request: Request, access: Access) -> Principal | None:
        """Authenticate the request and apply the policy of ``access``.

        Returns:
            The authenticated principal, or None for an anonymous request that is allowed.

        Raises:
            NotAuthenticated: A bad credential, or none where the policy wants one (401).
            PermissionDenied: The caller is known but the policy refuses it (403).
        """
        principal = await self.authenticate(request)
        policy = self._policies[access]
        if policy is None or await evaluate(policy, principal, request):
            return principal
        if principal is None:
            raise NotAuthenticated("Authentication required: send Authorization: Bearer <token>")
        raise PermissionDenied(f"Forbidden: {principal.name} may not {access.value}")

    async def tenant_of(self, request: Request) -> str | None:
        """The caller's tenant (None: it sees every tenant); see ``Tenancy``.

        Raises:
            TenantUnknown: The tenant resolver failed (500).
        """
        return await self.tenancy.tenant_of(request)

    async def created_by(self, request: Request, submitted: str | None) -> str | None:
        """The creator to record for a create request.

        The user resolver decides first; then the authenticated principal's name. The
        submitted ``createdBy`` form value counts only when no policy is configured
        (anonymous self-hosting); otherwise an unnamed caller is recorded as anonymous.
        """
        if self._user_resolver is not None:
            name = self._user_resolver(request)
            if inspect.isawaitable(name):
                name = await name
            if isinstance(name, str) and name.strip():
                return name.strip()
        principal = principal_of(request)
        if principal is not None:
            return principal.name
        return None if self.enabled else submitted

    async def aclose(self) -> None:
        """Release the JWKS HTTP client, if any."""
        if self._verifier is not None:
            await self._verifier.aclose()


def _jwt_verifier(settings: Settings) -> JwtVerifier | None:
    """The JWT verifier the settings ask for, if any.

    PyJWT, cryptography and the HTTP client are imported only then: every process (workers
    too) imports this module, and most never verify a token.
    """
    secret = settings.auth_jwt_secret
    if secret is None and not settings.auth_jwt_jwks_url:
        return None
    from bulkops.api.auth.jwks import JwksKeys
    from bulkops.api.auth.jwt_bearer import JwtVerifier

    jwks = None
    if settings.auth_jwt_jwks_url:
        jwks = JwksKeys(
            settings.auth_jwt_jwks_url,
            ttl=settings.auth_jwt_jwks_ttl,
            min_refresh_interval=settings.auth_jwt_jwks_min_refresh_interval,
        )
    return JwtVerifier(
        secret=secret.get_secret_value() if secret is not None else None,
        jwks=jwks,
        audience=settings.auth_jwt_audience,
        issuer=settings.auth_jwt_issuer,
        read_scope=settings.auth_jwt_read_scope,
        operate_scope=settings.auth_jwt_operate_scope,
        leeway=settings.auth_jwt_leeway,
        required_claims=settings.auth_jwt_required_claims,
        tenant_claim=settings.auth_jwt_tenant_claim,
    )
