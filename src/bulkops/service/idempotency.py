"""Idempotent create: the ``Idempotency-Key`` header and the fingerprint of a submission."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from bulkops.errors import BadRequest

MAX_KEY_LENGTH = 255


def check_key(key: str | None) -> str | None:
    """The header's value, or None when absent.

    Raises:
        BadRequest: empty, longer than 255 characters, or not printable ASCII.
    """
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY_LENGTH or not (key.isascii() and key.isprintable()):
        raise BadRequest(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters"
        )
    return key


class Fingerprint:
    """A SHA-256 of what a create submitted: the operation, its metadata and column map, and
    the file's bytes (hashed as they stream past)."""

    def __init__(self, operation_name: str, metadata: dict[str, Any], column_map: Any) -> None:
        self._hash = hashlib.sha256()
        head = json.dumps([operation_name.casefold(), metadata, column_map], sort_keys=True)
        self._hash.update(head.encode())
        self._hash.update(b"\0")

    async def through(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        """Pass ``chunks`` on, hashing them."""
        async for chunk in chunks:
            self._hash.update(chunk)
            yield chunk

    def include(self, part: str) -> None:
        """Add a part of the submission beside the head and the file (a dry run, the
        operation a create reads its file from)."""
        self._hash.update(b"\0" + part.encode())

    def hexdigest(self) -> str:
        """The fingerprint so far."""
        return self._hash.hexdigest()
