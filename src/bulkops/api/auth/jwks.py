"""The issuer's public keys from a JWKS endpoint: cached, refreshed on an unknown ``kid``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from bulkops.api.auth.errors import KeysUnavailable, NotAuthenticated

log = logging.getLogger("bulkops.auth")

# The one algorithm accepted for each key type: a token never chooses a weaker one, never
# `none`, and never HS256 (which would turn a public key into a shared secret).
PINNED_ALGORITHMS: Mapping[tuple[str, str | None], str] = {
    ("RSA", None): "RS256",
    ("EC", "P-256"): "ES256",
}
MAX_JWKS_BYTES = 1024 * 1024
FETCH_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """A public key and the algorithm pinned to it."""

    kid: str | None
    algorithm: str
    key: Any  # a cryptography public key object


def parse_jwks(document: Any) -> dict[str | None, VerificationKey]:
    """The usable signing keys of a JWKS document, by ``kid``.

    Keys that are not RSA or EC P-256 public signing keys (symmetric ``oct`` keys, other
    curves, ``use`` other than ``sig``, an ``alg`` other than the pinned one) are skipped.

    Raises:
        ValueError: The document is not a JWKS object.
    """
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError('a JWKS document is an object with a "keys" array')
    keys: dict[str | None, VerificationKey] = {}
    for data in document["keys"]:
        key = _verification_key(data)
        if key is not None:
            keys[key.kid] = key
    return keys


def _verification_key(data: Any) -> VerificationKey | None:
    if not isinstance(data, dict):
        return None
    kty, crv = data.get("kty"), data.get("crv") if data.get("kty") == "EC" else None
    algorithm = PINNED_ALGORITHMS.get((str(kty), crv))
    if algorithm is None or data.get("use", "sig") != "sig":
        return None
    if data.get("alg", algorithm) != algorithm or "d" in data:
        return None  # another algorithm, or a private key published by mistake
    try:
        key = jwt.PyJWK(data, algorithm=algorithm).key
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
        log.warning("Skipping a JWKS key that cannot be loaded (kid %r)", data.get("kid"))
        return None
    kid = data.get("kid")
    return VerificationKey(kid=kid if isinstance(kid, str) else None, algorithm=algorithm, key=key)


class JwksKeys:
    """Fetches and caches a JWKS.

    Keys are fetched on first use and again after ``ttl`` seconds. A token signed with an
    unknown ``kid`` (the issuer rotated its keys) triggers an early fetch, but fetches are
    at least ``min_refresh_interval`` seconds apart whatever happens, so tokens with made-up
    ``kid`` values cannot make the service hammer the issuer. When a fetch fails the keys
    already known stay in use.
    """

    def __init__(
        self,
        url: str,
        *,
        ttl: float,
        min_refresh_interval: float,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._ttl = ttl
        self._min_interval = min_refresh_interval
        self._client = client or httpx.AsyncClient(timeout=FETCH_TIMEOUT)
        self._owns_client = client is None
        self._clock = clock
        self._keys: dict[str | None, VerificationKey] | None = None
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0  # fetch attempts so far, for operators and tests

    async def key_for(self, kid: str | None) -> VerificationKey:
        """The key that signed a token whose header names ``kid``.

        Raises:
            NotAuthenticated: No key has that ``kid`` (after at most one early refresh).
            KeysUnavailable: No key was ever fetched and the endpoint cannot be reached.
        """
        if self._keys is None or self._clock() - self._fetched_at >= self._ttl:
            await self._refresh()
        key = self._find(kid)
        if key is None:
            await self._refresh()
            key = self._find(kid)
        if key is None:
            raise NotAuthenticated(
                f"Invalid bearer token: unknown signing key {kid!r}", invalid_token=True
            )
        return key

    def _find(self, kid: str | None) -> VerificationKey | None:
        keys = self._keys or {}
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))  # a single key needs no kid
        return keys.get(kid) if kid is not None else None

    async def _refresh(self) -> None:
        seen = self.fetches
        async with self._lock:
            if self.fetches != seen or not self._may_fetch():
                # Another request fetched while this one waited, or the last fetch is too
                # recent: use what is known.
                if self._keys is None:
                    raise KeysUnavailable("The token issuer's keys are unavailable; try again")
                return
            self._attempted_at = self._clock()
            self.fetches += 1
            try:
                keys = parse_jwks(await self._download())
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("Cannot fetch the JWKS at %s: %s", self._url, exc)
                if self._keys is None:
                    raise KeysUnavailable(
                        "The token issuer's keys are unavailable; try again"
                    ) from None
                return
            self._keys, self._fetched_at = keys, self._clock()

    def _may_fetch(self) -> bool:
        attempted = self._attempted_at
        return attempted is None or self._clock() - attempted >= self._min_interval

    async def _download(self) -> Any:
        async with self._client.stream("GET", self._url) as response:
            response.raise_for_status()
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) > MAX_JWKS_BYTES:
                    raise ValueError("the JWKS document is larger than 1 MiB")
        return json.loads(bytes(body))

    async def aclose(self) -> None:
        """Close the HTTP client (when this object created it)."""
        if self._owns_client:
            await self._client.aclose()
