"""The HTTP server of ``serve`` and ``gateway``: uvicorn, with limits on what a client sends.

uvicorn's httptools protocol accepts request headers of any size and waits for ever for a
client that sends its headers or its body slowly, so one client can hold memory and a
connection open at will. ``GuardedProtocol`` adds what it lacks:

- request line and header fields beyond ``max_header_bytes`` are answered 431 and the
  connection closed, before the application sees the request;
- headers not complete within ``header_timeout`` seconds of the connection (or of the
  request's first byte, for a later request on a kept-alive connection) are answered 408;
- a request body that stops (no byte for ``body_timeout`` seconds) or trickles (less than
  ``body_min_rate`` bytes a second on average, after a grace of ``body_timeout``) is cut
  off: 408 when nothing was answered yet, else the connection is closed. Time when the
  server itself stopped reading (the application is not ready for more) does not count.
"""

from __future__ import annotations

import asyncio
import json
from asyncio import TimerHandle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from bulkops.gateway.settings import GatewaySettings
from bulkops.settings import Settings

__all__ = ["ClientLimits", "GuardedProtocol", "guarded_protocol", "run"]


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """What a client may send (sizes in bytes, durations in seconds)."""

    max_header_bytes: int
    header_timeout: float
    body_timeout: float
    body_min_rate: float  # 0: only the pause between two parts of a body is limited

    @classmethod
    def of(cls, settings: Settings | GatewaySettings) -> ClientLimits:
        """The limits an instance's or a gateway's settings give."""
        return cls(
            max_header_bytes=settings.max_header_bytes,
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            body_min_rate=settings.body_min_rate,
        )


def run(app: Any, *, host: str, port: int, limits: ClientLimits, **options: Any) -> None:
    """Serve ``app`` with uvicorn on ``host:port`` under ``limits`` until stopped."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, http=guarded_protocol(limits), **options)


def guarded_protocol(limits: ClientLimits) -> type[GuardedProtocol]:
    """The protocol class uvicorn builds for each connection, bound to ``limits``."""
    return type("BoundGuardedProtocol", (GuardedProtocol,), {"limits": limits})


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header size limit and slow-client timeouts."""

    limits: ClientLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False  # answered (or cut off) by the guard: ignore the rest
        self._header_bytes = 0
        self._timer: TimerHandle | None = None
        self._body_start = self._body_last = 0.0
        self._body_bytes = 0

    # Connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the clock of the first request's headers."""
        super().connection_made(transport)
        self._arm(self.limits.header_timeout, self._headers_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clocks."""
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse, unless the guard has answered this connection already."""
        if not self._refused:
            super().data_received(data)

    # Parser callbacks
    def on_message_begin(self) -> None:
        """A request begins: count its header bytes; its headers' clock starts now unless
        it runs since the connection opened."""
        super().on_message_begin()
        self._header_bytes = 0
        if self._timer is None:
            self._arm(self.limits.header_timeout, self._headers_timed_out)

    def on_url(self, url: bytes) -> None:
        """Count the request line toward the header limit."""
        if self._refused or self._count_header(len(url)):
            return
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count each header field toward the header limit."""
        if self._refused or self._count_header(len(name) + len(value) + 4):
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """Headers in time and in size: the request goes to the application, and its body
        (if any) has its own clock."""
        if self._refused:
            return
        self._disarm()
        super().on_headers_complete()
        now = self.loop.time()
        self._body_start = self._body_last = now
        self._body_bytes = 0
        self._arm(self.limits.body_timeout, self._check_body)

    def on_body(self, body: bytes) -> None:
        """Count the body's bytes for its rate."""
        if self._refused:
            return
        self._body_bytes += len(body)
        self._body_last = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        """The body is complete: no clock runs until the next request begins."""
        if self._refused:
            return
        self._disarm()
        super().on_message_complete()

    # The guard
    def _count_header(self, size: int) -> bool:
        """Add ``size`` header bytes; True when that passes the limit (and answered 431)."""
        self._header_bytes += size
        if self._header_bytes <= self.limits.max_header_bytes:
            return False
        limit = self.limits.max_header_bytes
        self._refuse(431, f"Request line and headers exceed the limit of {limit} bytes")
        return True

    def _headers_timed_out(self) -> None:
        self._timer = None
        if self._busy():  # a response is being written: close after it, answer nothing
            self._cut_off()
        elif self.headers is None:  # not a byte of a request since the connection opened
            self._refused = True
            self.transport.close()
        else:
            timeout = self.limits.header_timeout
            self._refuse(408, f"Request headers were not received within {timeout:g} s")

    def _check_body(self) -> None:
        self._timer = None
        now, limits = self.loop.time(), self.limits
        waiting = self.cycle is not None and self.cycle.waiting_for_100_continue
        if self.flow.read_paused or waiting:  # we are not reading: the client is not late
            self._body_start = self._body_last = now
            self._body_bytes = 0
            self._arm(limits.body_timeout, self._check_body)
            return
        deadline = self._body_last + limits.body_timeout
        if limits.body_min_rate > 0:
            paced = self._body_start + limits.body_timeout + self._body_bytes / limits.body_min_rate
            deadline = min(deadline, paced)
        if now < deadline:
            self._arm(deadline - now, self._check_body)
        elif self.cycle is not None and self.cycle.response_started:
            self._cut_off()
        else:
            self._refuse(408, _slow_body_message(limits))

    def _busy(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _cut_off(self) -> None:
        self._refused = True
        if self.cycle is not None:
            self.cycle.keep_alive = False
        self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with an error body and close the connection."""
        self._refused = True
        self._disarm()
        body = json.dumps({"error": message}).encode()
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % len(body)
        )
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _slow_body_message(limits: ClientLimits) -> str:
    rate = f" or slower than {limits.body_min_rate:g} bytes/s" if limits.body_min_rate > 0 else ""
    return f"The request body stopped for {limits.body_timeout:g} s{rate}"
