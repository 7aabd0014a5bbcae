"""Static bearer tokens (``BULKOPS_AUTH_TOKENS``), each granted read or read+operate."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from bulkops.api.auth.principal import Access, Principal
from bulkops.settings import TokenGrant

_GRANTS = {
    "read": frozenset({Access.READ}),
    "operate": frozenset({Access.READ, Access.OPERATE}),
}


def default_token_name(token: str) -> str:
    """``token-`` plus the first 8 hex digits of the token's SHA-256: names the caller in
    ``createdBy`` and logs without revealing the token."""
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes
    principal: Principal


class StaticTokens:
    """Looks a presented bearer token up among the configured ones.

    Only SHA-256 digests of the tokens are kept, and the presented token's digest is
    compared with every entry in constant time (``hmac.compare_digest``), so neither the
    answer time nor a memory dump tells which token came close.
    """

    def __init__(self, grants: Mapping[str, TokenGrant]) -> None:
        self._entries = [
            _Entry(
                digest=_digest(token),
                principal=Principal(
                    name=grant.name or default_token_name(token),
                    grants=_GRANTS[grant.role],
                    kind="token",
                    tenant=grant.tenant,
                ),
            )
            for token, grant in grants.items()
        ]

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(self, token: str) -> Principal | None:
        """The principal of ``token``, or None when it is not one of the configured tokens."""
        presented = _digest(token)
        found: Principal | None = None
        for entry in self._entries:
            # No early exit: every entry is compared whatever matched before.
            if hmac.compare_digest(presented, entry.digest):
                found = entry.principal
        return found


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
