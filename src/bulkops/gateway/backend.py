"""One backend instance as the gateway reaches it: an HTTP client with a timeout, retries of
idempotent requests, and a circuit breaker."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import httpx
import stamina

from bulkops.gateway.breaker import CircuitBreaker, CircuitOpen
from bulkops.gateway.settings import GatewaySettings

OutgoingHook = Callable[[httpx.Request, str], Awaitable[None] | None]
"""Called with each request to a backend and the backend's name, before retries and the
circuit breaker: it may set headers (e.g. a credential), which every retry then carries."""

Headers = Sequence[tuple[str, str]]
Params = list[tuple[str, str]] | dict[str, str | int]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
RETRY_STATUSES = frozenset({502, 503, 504})
RETRY_WAIT_INITIAL = 0.05
RETRY_WAIT_MAX = 1.0


class BackendFailure(Exception):
    """A backend gave no usable answer: unreachable, timed out, its circuit is open, or (where
    the caller asks for it) it answered with a server error.

    ``status_code`` is what the gateway answers when the request was routed to this backend
    alone: 502 unreachable or a server error, 503 circuit open, 504 timed out.
    """

    def __init__(self, backend: str, reason: str, *, status_code: int = 502) -> None:
        super().__init__(f"backend {backend!r} {reason}")
        self.backend = backend
        self.reason = reason
        self.status_code = status_code


class _RetryableAnswer(Exception):
    """A transient server error (502/503/504) worth another attempt."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"answered {response.status_code}")
        self.response = response


class Backend:
    """A named backend with its own ``httpx.AsyncClient`` and circuit breaker.

    Args:
        name: The gateway's name of the backend (used in ``sourceService`` and ``source``).
        url: Base URL of the backend instance.
        settings: Timeouts, retries and breaker thresholds.
        hooks: Outgoing hooks, run on every request before retries and the breaker.
        transport: An httpx transport to use instead of the network (tests, embedding).
    """

    def __init__(
        self,
        name: str,
        url: str,
        settings: GatewaySettings,
        hooks: Sequence[OutgoingHook] = (),
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.url = url
        self.breaker = CircuitBreaker(
            name,
            failure_threshold=settings.circuit_breaker_failures,
            break_duration=settings.circuit_breaker_break_duration,
        )
        self._client = httpx.AsyncClient(
            base_url=url,
            timeout=httpx.Timeout(settings.http_timeout),
            transport=transport,
            follow_redirects=False,
        )
        self._attempts = settings.http_retry_count + 1
        self._retry_timeout = settings.http_timeout
        self._hooks = tuple(hooks)

    def request(
        self,
        method: str,
        target: str,
        *,
        headers: Headers = (),
        params: Params | None = None,
        content: bytes | AsyncIterator[bytes] | None = None,
    ) -> httpx.Request:
        """Build a request to this backend; ``target`` is a path, optionally with a query."""
        return self._client.build_request(
            method,
            target,
            headers=list(headers),
            params=tuple(params) if isinstance(params, list) else params,
            content=content,
        )

    async def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """Send through the hooks, retries (idempotent methods only) and the breaker.

        Returns:
            The backend's answer, whatever its status (after retries of 502/503/504). With
            ``stream`` the body is not read yet: close the response when done.

        Raises:
            BackendFailure: no answer (unreachable, timed out, circuit open).
        """
        for hook in self._hooks:
            outcome = hook(request, self.name)
            if inspect.isawaitable(outcome):
                await outcome
        try:
            if request.method in IDEMPOTENT_METHODS and self._attempts > 1:
                return await self._send_with_retries(request, stream)
            return await self._attempt(request, stream)
        except CircuitOpen as exc:
            raise BackendFailure(
                self.name,
                f"is unavailable (circuit open for {exc.retry_after:.1f} s more)",
                status_code=503,
            ) from None
        except httpx.TimeoutException:
            raise BackendFailure(self.name, "timed out", status_code=504) from None
        except httpx.TransportError as exc:
            raise BackendFailure(self.name, f"is unreachable ({type(exc).__name__})") from None

    async def get_json(
        self,
        target: str,
        *,
        params: Params | None = None,
        headers: Headers = (),
    ) -> tuple[int, Any]:
        """GET a JSON answer: its status and body. A server error counts as a failure.

        Raises:
            BackendFailure: no answer, a 5xx answer, or a body that is not JSON.
        """
        response = await self.send(self.request("GET", target, params=params, headers=headers))
        if response.status_code >= 500:
            raise BackendFailure(self.name, f"answered {response.status_code}")
        try:
            return response.status_code, response.json()
        except ValueError:
            raise BackendFailure(self.name, "answered with a body that is not JSON") from None

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def _send_with_retries(self, request: httpx.Request, stream: bool) -> httpx.Response:
        try:
            async for attempt in stamina.retry_context(
                on=(httpx.TransportError, _RetryableAnswer),
                attempts=self._attempts,
                timeout=self._retry_timeout,
                wait_initial=RETRY_WAIT_INITIAL,
                wait_max=RETRY_WAIT_MAX,
            ):
                with attempt:
                    response = await self._attempt(request, stream)
                    if response.status_code in RETRY_STATUSES:
                        await response.aread()  # an error body: small, kept for the caller
                        raise _RetryableAnswer(response)
                    return response
        except _RetryableAnswer as exc:
            return exc.response  # the last attempt's answer, relayed as it is
        raise RuntimeError("retry loop ended without an answer")  # pragma: no cover

    async def _attempt(self, request: httpx.Request, stream: bool) -> httpx.Response:
        self.breaker.acquire()
        try:
            response = await self._client.send(request, stream=stream)
        except httpx.TransportError:
            self.breaker.failure()
            raise
        except BaseException:  # cancelled: the caller left, not the backend's fault
            self.breaker.release()
            raise
        if response.status_code >= 500:
            self.breaker.failure()
        else:
            self.breaker.success()
        return response
