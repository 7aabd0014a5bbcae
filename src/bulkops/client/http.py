"""The request layer of the client: one httpx session, its errors and its retries."""

from __future__ import annotations

from typing import IO, Any, TypeVar

import httpx
import stamina
from pydantic import BaseModel

from bulkops.client.errors import ApiError

DEFAULT_URL = "http://127.0.0.1:8000"
M = TypeVar("M", bound=BaseModel)


def query(**values: Any) -> dict[str, Any]:
    """Query parameters, leaving out those not given."""
    return {key: value for key, value in values.items() if value is not None}


class HttpSession:
    """Requests to one service: a bearer token on each, errors raised as ``ApiError``,
    reads retried on connection errors (see ``AsyncClient`` for the arguments)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = 3,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._retries = max(1, retries)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    # --- the request layer ----------------------------------------------------------------

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; a read is retried on connection errors. Raises ApiError."""
        attempts = self._retries if method == "GET" else 1
        try:
            async for attempt in stamina.retry_context(
                on=httpx.TransportError, attempts=attempts, wait_initial=0.1, wait_max=2.0
            ):
                with attempt:
                    response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiError(
                0, None, f"Cannot reach {self.url}: {exc or type(exc).__name__}"
            ) from exc
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return (await self._send(method, path, **kwargs)).json()

    async def _model(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        return model.model_validate(await self._json(method, path, **kwargs))

    async def _stream_to(self, path: str, params: dict[str, Any], out: IO[bytes]) -> int:
        """Stream a GET answer's body into ``out``; returns the bytes written."""
        try:
            async with self._http.stream("GET", path, params=params) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _api_error(response)
                written = 0
                async for chunk in response.aiter_bytes():
                    out.write(chunk)
                    written += len(chunk)
                return written
        except httpx.TransportError as exc:
            raise ApiError(
                0, None, f"Cannot reach {self.url}: {exc or type(exc).__name__}"
            ) from exc


def _api_error(response: httpx.Response) -> ApiError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return ApiError(response.status_code, body)
