"""Download helpers."""

from __future__ import annotations

from urllib.parse import quote


def content_disposition(file_name: str) -> str:
    """An ``attachment`` header value; non-ASCII names also go in RFC 6266 ``filename*``."""
    ascii_name = file_name.encode("ascii", "replace").decode("ascii").replace("?", "_")
    ascii_name = ascii_name.replace("\\", "_").replace('"', "_")
    value = f'attachment; filename="{ascii_name}"'
    if ascii_name != file_name:
        value += f"; filename*=UTF-8''{quote(file_name, safe='')}"
    return value
