"""Passing requests on to a backend and its answers back: headers, streaming, disconnects."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

T = TypeVar("T")

# Hop-by-hop headers (RFC 9110 7.6.1) describe one connection and are never passed on.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Set by httpx for the backend connection, or decided below (authorization).
_NOT_FORWARDED = HOP_BY_HOP | {
    "host",
    "content-length",
    "authorization",
    "accept-encoding",
    "expect",  # 100-continue is between the caller and the gateway
}
# The gateway's own server adds these.
_NOT_RELAYED = HOP_BY_HOP | {"date", "server"}
BUFFER_LIMIT = 64 * 1024


class CallerGone(Exception):
    """The caller disconnected before the backends answered; their calls were cancelled."""


def backend_headers(request: Request, *, forward_bearer: bool) -> list[tuple[str, str]]:
    """The caller's headers as a backend should see them.

    Hop-by-hop headers stay behind; the caller's ``Authorization: Bearer`` header is passed on
    only when ``forward_bearer`` (ForwardBearerToken); ``X-Forwarded-*`` name the caller.
    """
    headers = [(k, v) for k, v in request.headers.items() if k not in _NOT_FORWARDED]
    authorization = request.headers.get("authorization", "")
    if forward_bearer and authorization[:7].lower() == "bearer ":
        headers.append(("authorization", authorization))
    if request.client is not None:
        earlier = request.headers.get("x-forwarded-for")
        chain = f"{earlier}, {request.client.host}" if earlier else request.client.host
        headers = [(k, v) for k, v in headers if k != "x-forwarded-for"]
        headers.append(("x-forwarded-for", chain))
    if "x-forwarded-proto" not in request.headers:
        headers.append(("x-forwarded-proto", request.url.scheme))
    if "x-forwarded-host" not in request.headers and "host" in request.headers:
        headers.append(("x-forwarded-host", request.headers["host"]))
    return headers


def target_of(request: Request) -> str:
    """The request's path and query exactly as the caller sent them (percent-encoding kept)."""
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
    query = request.scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def relay(upstream: httpx.Response) -> Response:
    """A backend's answer for the caller, with its status and headers (Content-Disposition,
    Location ...). A small body (declared within 64 KiB) is read and sent in one piece;
    anything else, downloads above all, streams through as it arrives."""
    length = upstream.headers.get("content-length", "")
    if upstream.is_stream_consumed or (length.isdigit() and int(length) <= BUFFER_LIMIT):
        try:
            await upstream.aread()
        finally:
            await upstream.aclose()
        response = Response(upstream.content, status_code=upstream.status_code)
        response.raw_headers = _relayed_headers(upstream, decoded=True)
        return response
    return RelayResponse(upstream)


class RelayResponse(StreamingResponse):
    """A backend's answer streamed to the caller as it arrives. The backend response is
    closed however the stream ends, so a caller that leaves mid-download ends the backend's
    download too."""

    def __init__(self, upstream: httpx.Response) -> None:
        super().__init__(upstream.aiter_raw(), status_code=upstream.status_code)
        self.raw_headers = _relayed_headers(upstream, decoded=False)
        self._upstream = upstream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._upstream.aclose()


def _relayed_headers(upstream: httpx.Response, *, decoded: bool) -> list[tuple[bytes, bytes]]:
    # A body already read is relayed decoded: its own length, no content encoding.
    skipped = _NOT_RELAYED | {"content-length", "content-encoding"} if decoded else _NOT_RELAYED
    headers = [
        (key.encode("latin-1"), value.encode("latin-1"))
        for key, value in upstream.headers.multi_items()
        if key not in skipped
    ]
    if decoded:
        headers.append((b"content-length", str(len(upstream.content)).encode()))
    return headers


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Await ``work`` unless the caller disconnects first, which cancels it (and so every
    backend call it makes).

    Read the request body before calling this: the watcher consumes what the caller sends.

    Raises:
        CallerGone: the caller disconnected.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this request itself was cancelled
        task.cancel()
        watcher.cancel()
        raise
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    await asyncio.wait({task})  # let the backend calls unwind and close their connections
    if not task.cancelled():
        task.exception()  # finished meanwhile: nobody will read its outcome
    raise CallerGone()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
