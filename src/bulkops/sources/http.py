"""Reading an allow-listed http(s) ``sourceUrl`` without opening a server-side request
forgery hole.

The name of the URL's host is resolved here, every address it resolves to must be public,
and the connection goes to that checked address (with the name in ``Host`` and as the TLS
server name), so a DNS answer that changes between the check and the connection cannot
reach inside. A prefix whose host is an IP literal is trusted as written. Redirects are
never followed, proxies from the environment never used.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from bulkops.errors import BadGateway, BadRequest, PayloadTooLarge
from bulkops.sources.addresses import IPAddress, Resolver, is_public, parse_address
from bulkops.sources.allow import AllowList, Target
from bulkops.sources.base import Fetched

if TYPE_CHECKING:
    import httpx

# httpx is imported by the functions that fetch: a process that never fetches a source
# (a worker, most of the time) does not carry it.

# A name resolving to many addresses: the first few are tried, in order.
_MAX_ADDRESSES = 4


class HttpSource:
    """Opens allow-listed http(s) URLs.

    Args:
        allow: The prefixes a URL must start with (empty: every URL refused).
        resolver: Resolves a host name to its addresses.
        timeout: Seconds to connect, and at most between two reads of the body.
        min_rate: Slowest average rate of a body after its first ``timeout`` seconds, in
            bytes per second (0: no minimum): a source that trickles is failing, as an
            upload that trickles is (``BULKOPS_BODY_MIN_RATE``).
    """

    def __init__(
        self, allow: AllowList, resolver: Resolver, *, timeout: float, min_rate: float = 0.0
    ) -> None:
        self._allow = allow
        self._resolver = resolver
        self._timeout = timeout
        self._min_rate = min_rate

    def check(self, target: Target) -> Target:
        """The prefix ``target`` starts with.

        Raises:
            BadRequest: it starts with no allowed prefix.
        """
        prefix = self._allow.match(target)
        if prefix is None:
            raise BadRequest(
                "sourceUrl is not allowed: it starts with no prefix of "
                "BULKOPS_SOURCE_URL_ALLOW" + ("" if self._allow else " (which is empty)")
            )
        return prefix

    async def _addresses(self, target: Target) -> list[IPAddress]:
        """Where to connect: the literal address, or the host name's addresses, all public.

        Raises:
            BadRequest: the name resolves to an address that is not public.
            BadGateway: the name does not resolve.
        """
        if target.address is not None:  # an IP literal: allow-listed as written
            return [target.address]
        try:
            found = await self._resolver(target.host, target.port)
        except OSError as exc:
            raise BadGateway(f"sourceUrl host {target.host!r} does not resolve: {exc}") from None
        addresses = [parse_address(text) for text in found]
        if not addresses:
            raise BadGateway(f"sourceUrl host {target.host!r} does not resolve")
        for text, address in zip(found, addresses, strict=True):
            if address is None or not is_public(address):
                raise BadRequest(
                    f"sourceUrl is not allowed: {target.host!r} resolves to {text}, "
                    "which is not a public address"
                )
        return [a for a in addresses if a is not None][:_MAX_ADDRESSES]

    @asynccontextmanager
    async def open(self, target: Target, max_bytes: int) -> AsyncIterator[Fetched]:
        """The body of ``target`` (already parsed) while the context lasts.

        Raises:
            BadRequest: not allowed (nothing fetched).
            BadGateway: unreachable, failing, an answer other than 200 (a redirect
                included), or broken off while read.
            PayloadTooLarge: a declared length past ``max_bytes``.
        """
        import httpx

        self.check(target)
        addresses = await self._addresses(target)
        async with httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(self._timeout),
        ) as client:
            response = await self._send(client, target, addresses)
            try:
                _check_answer(target, response, max_bytes)
                yield Fetched(
                    target.file_name,
                    response.headers.get("content-type"),
                    self._body(response),
                )
            finally:
                await response.aclose()

    async def _body(self, response: httpx.Response) -> AsyncIterator[bytes]:
        import httpx

        started, seen = time.monotonic(), 0
        try:
            # As the network hands them over: a size would hold chunks back until it is
            # reached, and the rate could not be checked meanwhile.
            async for chunk in response.aiter_raw():
                seen += len(chunk)
                elapsed = time.monotonic() - started
                if self._min_rate and elapsed > self._timeout and seen < self._min_rate * elapsed:
                    raise BadGateway(
                        f"sourceUrl is too slow: {seen} bytes in {elapsed:.0f} s, under "
                        f"{self._min_rate:g} bytes per second"
                    )
                yield chunk
        except httpx.HTTPError as exc:
            raise BadGateway(f"sourceUrl broke off while read: {_reason(exc)}") from None

    async def _send(
        self, client: httpx.AsyncClient, target: Target, addresses: list[IPAddress]
    ) -> httpx.Response:
        import httpx

        failure: Exception | None = None
        for address in addresses:
            host = f"[{address}]" if address.version == 6 else str(address)
            request = client.build_request(
                "GET",
                httpx.URL(f"{target.scheme}://{host}:{target.port}{target.path}"),
                headers={"Host": target.authority, "Accept-Encoding": "identity"},
                # The certificate is checked against the name, not the address.
                extensions={"sni_hostname": target.host} if target.address is None else {},
            )
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                failure = exc
            except httpx.HTTPError as exc:
                raise BadGateway(f"sourceUrl could not be read: {_reason(exc)}") from None
        raise BadGateway(f"sourceUrl could not be read: {_reason(failure)}")


def _check_answer(target: Target, response: httpx.Response, max_bytes: int) -> None:
    import httpx

    if response.is_redirect:
        raise BadGateway(
            f"sourceUrl answered {response.status_code} (a redirect to "
            f"{response.headers.get('location', '?')[:200]!r}); redirects are not followed"
        )
    if response.status_code != httpx.codes.OK:
        raise BadGateway(
            f"sourceUrl answered {response.status_code} {response.reason_phrase}".rstrip()
        )
    declared = response.headers.get("content-length", "")
    if max_bytes and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(
            f"File exceeds the upload limit of {max_bytes} bytes (sourceUrl declares {declared})",
            limit=max_bytes,
        )


def _reason(exc: Exception | None) -> str:
    if exc is None:
        return "no address to connect to"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
