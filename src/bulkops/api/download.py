"""Download helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote


def content_disposition(file_name: str) -> str:
    """An ``attachment`` header value; non-ASCII names also go in RFC 6266 ``filename*``."""
    ascii_name = file_name.encode("ascii", "replace").decode("ascii").replace("?", "_")
    ascii_name = ascii_name.replace("\\", "_").replace('"', "_")
    value = f'attachment; filename="{ascii_name}"'
    if ascii_name != file_name:
        value += f"; filename*=UTF-8''{quote(file_name, safe='')}"
    return value


async def primed(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` with its first chunk read now: a storage failure at the start of a body
    (the file store or the database unreachable, a missing file) is raised here and
    answered with its status and error body, before the status line of a 200 is sent."""
    first = await anext(chunks, None)

    async def body() -> AsyncIterator[bytes]:
        if first is None:
            return
        yield first
        async for chunk in chunks:
            yield chunk

    return body()
