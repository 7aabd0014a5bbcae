"""JWT bearer tokens: HS256 with a shared secret, or RS256/ES256 with the issuer's JWKS."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jwt

from bulkops.api.auth.errors import NotAuthenticated
from bulkops.api.auth.jwks import JwksKeys
from bulkops.api.auth.principal import Access, Principal

SCOPE_CLAIMS = ("scope", "scp", "scopes")
NAME_CLAIMS = ("sub", "preferred_username", "name")


def token_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """Scopes from ``scope`` (space separated) and ``scp`` / ``scopes`` (lists, or space
    separated strings as some issuers send them)."""
    scopes: set[str] = set()
    for claim in SCOPE_CLAIMS:
        value = claims.get(claim)
        if isinstance(value, str):
            scopes.update(value.split())
        elif isinstance(value, list):
            scopes.update(item for item in value if isinstance(item, str))
    return frozenset(scopes)


def principal_name(claims: Mapping[str, Any]) -> str | None:
    """The caller's name: ``sub``, then ``preferred_username``, then ``name``."""
    for claim in NAME_CLAIMS:
        value = claims.get(claim)
        if isinstance(value, str) and value.strip():
            return value
    return None


class JwtVerifier:
    """Verifies JWT bearer tokens and turns their claims into a principal.

    The algorithm is never the token's choice: HS256 tokens are checked only against the
    shared secret, every other token only against a JWKS key with the algorithm pinned to
    that key's type, so ``none`` and "HS256 signed with the public key" are refused.

    Args:
        secret: The HS256 shared secret, if any.
        jwks: The issuer's keys, if any.
        audience: Required ``aud``; without it, tokens that carry an ``aud`` are refused.
        issuer: Required ``iss``.
        read_scope: Scope that grants reads (empty: every valid token may read).
        operate_scope: Scope that grants reads and operations (empty: every valid token).
        leeway: Seconds of clock skew tolerated on ``exp``, ``nbf`` and ``iat``.
        required_claims: Claims a token must carry (e.g. ``exp``).
        tenant_claim: The claim naming the caller's tenant; a token without it has none.
    """

    def __init__(
        self,
        *,
        secret: str | None,
        jwks: JwksKeys | None,
        audience: str | None = None,
        issuer: str | None = None,
        read_scope: str = "bulkops.read",
        operate_scope: str = "bulkops.operate",
        leeway: float = 0,
        required_claims: Sequence[str] = (),
        tenant_claim: str = "tenant",
    ) -> None:
        self._secret = secret
        self._jwks = jwks
        self._audience = audience
        self._issuer = issuer
        self._read_scope = read_scope
        self._operate_scope = operate_scope
        self._leeway = leeway
        self._required = list(required_claims)
        self._tenant_claim = tenant_claim

    async def authenticate(self, token: str) -> Principal:
        """The principal a valid token names.

        Raises:
            NotAuthenticated: The token is malformed, badly signed, expired, not yet valid,
                for another audience or issuer, or names nobody.
            KeysUnavailable: The JWKS cannot be fetched and no keys are cached.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise _invalid("it is not a JWT") from None
        key, algorithm = await self._key(header)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": self._required},
            )
        except jwt.InvalidTokenError as exc:
            raise _invalid(str(exc) or type(exc).__name__) from None
        name = principal_name(claims)
        if name is None:
            raise _invalid("it names no subject (sub, preferred_username or name)")
        return Principal(
            name=name,
            grants=self._grants(claims),
            kind="jwt",
            claims=claims,
            tenant=self._tenant(claims),
        )

    def _tenant(self, claims: Mapping[str, Any]) -> str | None:
        if self._tenant_claim not in claims:
            return None
        value = claims[self._tenant_claim]
        # Present but unusable: refused, never read as "no tenant" (which sees everything).
        if not isinstance(value, str) or not value.strip():
            raise _invalid(f"its {self._tenant_claim!r} claim is not a non-empty string")
        return value.strip()

    async def _key(self, header: Mapping[str, Any]) -> tuple[Any, str]:
        algorithm = header.get("alg")
        if algorithm == "HS256" and self._secret is not None:
            return self._secret, "HS256"
        if algorithm != "HS256" and self._jwks is not None:
            kid = header.get("kid")
            found = await self._jwks.key_for(kid if isinstance(kid, str) else None)
            return found.key, found.algorithm
        raise _invalid(f"algorithm {algorithm!r} is not accepted")

    async def aclose(self) -> None:
        """Release the JWKS HTTP client, if any."""
        if self._jwks is not None:
            await self._jwks.aclose()

    def _grants(self, claims: Mapping[str, Any]) -> frozenset[Access]:
        scopes = token_scopes(claims)
        if not self._operate_scope or self._operate_scope in scopes:
            return frozenset({Access.READ, Access.OPERATE})
        if not self._read_scope or self._read_scope in scopes:
            return frozenset({Access.READ})
        return frozenset()


def _invalid(reason: str) -> NotAuthenticated:
    return NotAuthenticated(f"Invalid bearer token: {reason}", invalid_token=True)
