"""Create and validate uploads: find ``operationName`` in the multipart stream to route the
request, then pass the body on byte for byte without holding it in memory."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from typing import IO

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from bulkops.errors import BadRequest

NAME_FIELD = b"operationName"
MAX_NAME_BYTES = 1024  # an operation name is short; more is not a name
SPOOL_IN_MEMORY = 1024 * 1024  # bytes read before operationName stay in memory up to this
REPLAY_CHUNK = SPOOL_WRITE = 256 * 1024


class _NameFinder:
    """Feeds a streaming multipart parser and keeps the value of the ``operationName`` part."""

    def __init__(self, boundary: bytes) -> None:
        self.value: str | None = None
        self._field = bytearray()
        self._header_value = bytearray()
        self._disposition = b""
        self._capturing = False
        self._buffer = bytearray()
        self._parser = MultipartParser(
            boundary,
            callbacks={
                "on_part_begin": self._part_begin,
                "on_header_field": self._header_field,
                "on_header_value": self._header_value_data,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
            },
        )

    @property
    def found(self) -> bool:
        return self.value is not None

    def feed(self, chunk: bytes) -> None:
        self._parser.write(chunk)

    def _part_begin(self) -> None:
        self._disposition = b""
        self._capturing = False
        self._buffer.clear()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if bytes(self._field).lower() == b"content-disposition":
            self._disposition = bytes(self._header_value)
        self._field.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._capturing = options.get(b"name") == NAME_FIELD and b"filename" not in options

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._capturing and len(self._buffer) <= MAX_NAME_BYTES:
            self._buffer += data[start:end]

    def _part_end(self) -> None:
        if self._capturing and self.value is None:
            self.value = bytes(self._buffer[:MAX_NAME_BYTES]).decode("utf-8", "replace")
        self._capturing = False


class Upload:
    """A create or validate body on its way to a backend.

    The bytes read until ``operationName`` was found are spooled (to a temporary file past
    1 MiB); the rest is read from the caller only as the backend takes it.
    """

    def __init__(
        self,
        operation_name: str | None,
        spool: IO[bytes],
        rest: AsyncIterator[bytes],
        headers: list[tuple[str, str]],
    ) -> None:
        self.operation_name = operation_name
        self.headers = headers  # content type (with the boundary) and length, as received
        self._spool = spool
        self._rest = rest

    async def body(self) -> AsyncIterator[bytes]:
        """The body exactly as the caller sent it."""
        await asyncio.to_thread(self._spool.seek, 0)
        while chunk := await asyncio.to_thread(self._spool.read, REPLAY_CHUNK):
            yield chunk
        async for chunk in self._rest:
            if chunk:
                yield chunk

    def close(self) -> None:
        """Remove the spooled bytes."""
        self._spool.close()


async def read_upload(request: Request) -> Upload:
    """Read a multipart body up to its ``operationName`` part.

    Raises:
        BadRequest: not a multipart body, or a malformed one before ``operationName``.
    """
    content_type = request.headers.get("content-type", "")
    mime, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if mime != b"multipart/form-data" or not boundary:
        raise BadRequest("Expected a multipart/form-data body with a 'file' part")
    finder = _NameFinder(boundary)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
    stream = request.stream().__aiter__()
    pending = bytearray()  # written to the spool in large pieces: callers may send tiny chunks
    try:
        while not finder.found:
            try:
                chunk = await anext(stream)
            except StopAsyncIteration:
                break
            finder.feed(chunk)
            pending += chunk
            if len(pending) >= SPOOL_WRITE:
                await asyncio.to_thread(spool.write, bytes(pending))
                pending.clear()
        await asyncio.to_thread(spool.write, bytes(pending))
    except MultipartParseError as exc:
        spool.close()
        raise BadRequest(f"Malformed multipart body: {exc}") from None
    except BaseException:
        spool.close()
        raise
    headers = [("content-type", content_type)]
    if "content-length" in request.headers:
        headers.append(("content-length", request.headers["content-length"]))
    return Upload(finder.value, spool, stream, headers)
