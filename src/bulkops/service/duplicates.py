"""Stored files' SHA-256 and duplicate uploads: the hash taken as a file streams past, and
the newest operation of the same name and tenant whose file had that hash."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterable, AsyncIterator

from bulkops.errors import BadRequest
from bulkops.storage.ports import OperationStore
from bulkops.storage.records import OperationQuery, OperationRecord

# How many operations with one hash a look-up reads to find the caller's tenant's newest:
# an unscoped caller's query matches every tenant's, so other tenants' are skipped.
_LOOK_AHEAD = 100
_HEX = frozenset("0123456789abcdef")


class FileHash:
    """A SHA-256 of a file's bytes, taken as they pass (no second read of the file)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    async def through(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        """Pass ``chunks`` on, hashing them."""
        async for chunk in chunks:
            self._hash.update(chunk)
            yield chunk

    def hexdigest(self) -> str:
        """The hash of the bytes seen so far, as 64 lowercase hex digits."""
        return self._hash.hexdigest()


def parse_sha256(text: str | None) -> str | None:
    """The ``fileSha256`` filter: 64 hex digits (any case), lowercased; absent or blank: None.

    Raises:
        BadRequest: anything else.
    """
    if text is None or not text.strip():
        return None
    value = text.strip().lower()
    if len(value) != 64 or not set(value) <= _HEX:
        raise BadRequest(f"fileSha256 must be 64 hex digits, got {text.strip()[:100]!r}")
    return value


async def find_duplicate(
    operations: OperationStore, operation_name: str, tenant: str | None, sha256: str
) -> OperationRecord | None:
    """The newest operation named ``operation_name`` of ``tenant`` (None: operations without
    one) whose stored file has the hash ``sha256``, if any."""
    page = await operations.list(
        OperationQuery(
            page_size=_LOOK_AHEAD,
            operation_name=operation_name,
            tenant=tenant,
            file_sha256=sha256,
        )
    )
    for record in page.items:  # newest first
        if record.tenant == tenant:
            return record
    return None
