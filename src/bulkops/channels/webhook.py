"""The ``webhook`` channel: POST the payload as JSON, signed when a secret is set."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bulkops.channels.base import Outcome
from bulkops.storage.records import DeliveryRecord

if TYPE_CHECKING:
    import httpx

TIMEOUT = 10.0


def signature(secret: str, body: bytes) -> str:
    """The ``Bulkops-Signature`` header value: ``sha256=<hex HMAC-SHA256 of the body>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def _private(host: str) -> bool:
    """Whether ``host`` is (or resolves to) a private, loopback or link-local address."""
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None)
        except socket.gaierror:
            return False  # the request will fail and be retried
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    return any(a.is_private or a.is_loopback or a.is_link_local or a.is_reserved for a in addresses)


class WebhookChannel:
    """``POST target`` with ``{event, operation, occurredAt}``; headers ``Bulkops-Event``,
    ``Bulkops-Delivery`` and, with a secret, ``Bulkops-Signature``. A 2xx answer delivers;
    anything else (or no answer within 10 s) is tried again later."""

    name = "webhook"

    def __init__(
        self, *, secret: str | None, allow_private: bool, timeout: float = TIMEOUT
    ) -> None:
        self._secret = secret
        self._allow_private = allow_private
        self._timeout = timeout
        # Made (and httpx imported) at the first delivery: most processes never send one.
        self._http: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        """Close the connections."""
        if self._http is not None:
            await self._http.aclose()

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
        return self._http

    async def send(self, delivery: DeliveryRecord) -> Outcome:
        """One attempt."""
        parts = urlsplit(delivery.target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return Outcome(False, error=f"Not an http(s) URL: {delivery.target!r}", retry=False)
        if not self._allow_private and await _private(parts.hostname):
            message = "Target is a private or loopback address (BULKOPS_WEBHOOK_ALLOW_PRIVATE)"
            return Outcome(False, error=message, retry=False)
        body = json.dumps(delivery.payload, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "bulkops-webhook",
            "Bulkops-Event": delivery.event,
            "Bulkops-Delivery": str(delivery.id),
        }
        if self._secret:
            headers["Bulkops-Signature"] = signature(self._secret, body)
        http = self._client()
        import httpx  # imported by _client

        try:
            response = await http.post(delivery.target, content=body, headers=headers)
        except httpx.TimeoutException:
            return Outcome(False, error="No answer within the timeout")
        except httpx.HTTPError as exc:
            return Outcome(False, error=f"{type(exc).__name__}: {exc}"[:500])
        if 200 <= response.status_code < 300:
            return Outcome(True, status_code=response.status_code)
        return Outcome(False, status_code=response.status_code, error=response.text[:500] or None)
