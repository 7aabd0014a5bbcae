"""Unit: finding operationName in a multipart stream without reading more than needed."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request

from bulkops.errors import BadRequest
from bulkops.gateway.uploads import SPOOL_IN_MEMORY, read_upload

BOUNDARY = "xyz"


def part(name: str, value: bytes, file_name: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"'
    if file_name is not None:
        disposition += f'; filename="{file_name}"'
    return f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"


def body(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


class Caller:
    """Sends a body in chunks and counts how many the gateway asked for."""

    def __init__(self, payload: bytes, chunk: int) -> None:
        self.chunks = [payload[i : i + chunk] for i in range(0, len(payload), chunk)]
        self.sent = 0

    async def receive(self) -> dict[str, Any]:
        if self.sent >= len(self.chunks):
            return {"type": "http.disconnect"}
        self.sent += 1
        return {
            "type": "http.request",
            "body": self.chunks[self.sent - 1],
            "more_body": self.sent < len(self.chunks),
        }

    def request(self, content_type: str = f"multipart/form-data; boundary={BOUNDARY}") -> Request:
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/api/bulks",
            "headers": [(b"content-type", content_type.encode())],
        }
        return Request(scope, self.receive)


async def replayed(upload: Any) -> bytes:
    return b"".join([chunk async for chunk in upload.body()])


async def test_the_name_before_the_file_stops_the_reading_early() -> None:
    payload = body(
        part("operationName", b"import-users"),
        part("file", b"name\n" + b"x\n" * 100_000, "big.csv"),
    )
    caller = Caller(payload, chunk=1000)
    upload = await read_upload(caller.request())
    try:
        assert upload.operation_name == "import-users"
        assert caller.sent == 1  # the rest is read only as the backend takes it
        assert await replayed(upload) == payload
        assert caller.sent == len(caller.chunks)
    finally:
        upload.close()


async def test_the_name_after_a_large_file_is_found_and_the_body_kept_whole() -> None:
    content = b"name\n" + b"row\n" * (SPOOL_IN_MEMORY // 2)  # spills to a temporary file
    payload = body(
        part("file", content, "big.csv"),
        part("metadata", b"{}"),
        part("operationName", b" beta "),
    )
    caller = Caller(payload, chunk=4093)  # boundaries split across chunks
    upload = await read_upload(caller.request())
    try:
        assert upload.operation_name == " beta "
        assert await replayed(upload) == payload
        assert ("content-type", f"multipart/form-data; boundary={BOUNDARY}") in upload.headers
    finally:
        upload.close()


async def test_a_body_sent_byte_by_byte_is_understood() -> None:
    payload = body(part("file", b"name\nx\n", "a.csv"), part("operationName", b"gamma"))
    upload = await read_upload(Caller(payload, chunk=1).request())
    try:
        assert upload.operation_name == "gamma"
        assert await replayed(upload) == payload
    finally:
        upload.close()


async def test_a_file_part_named_operation_name_is_not_a_name() -> None:
    payload = body(part("operationName", b"sneaky", "name.txt"), part("file", b"a\n", "a.csv"))
    upload = await read_upload(Caller(payload, chunk=64).request())
    try:
        assert upload.operation_name is None
    finally:
        upload.close()


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "multipart/form-data", "text/csv"]
)
async def test_anything_but_multipart_with_a_boundary_is_refused(content_type: str) -> None:
    with pytest.raises(BadRequest, match="multipart/form-data"):
        await read_upload(Caller(b"operationName=x", chunk=64).request(content_type))


async def test_a_malformed_body_is_refused() -> None:
    payload = f"--{BOUNDARY}\r\nContent-Disposition form-data\r\n\r\nx\r\n".encode()
    with pytest.raises(BadRequest, match="Malformed multipart body"):
        await read_upload(Caller(payload, chunk=64).request())
