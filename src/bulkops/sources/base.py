"""What a source hands to create and validate, and the port that opens sources."""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

# host, port -> the addresses the name resolves to (as text). Injected in the composition
# root so tests can make a name resolve anywhere without touching the system's resolver.
Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(slots=True)
class Fetched:
    """A source's file: its name (the URL's last segment), declared type and bytes as a
    one-shot stream."""

    file_name: str | None
    content_type: str | None
    chunks: AsyncIterable[bytes]


class SourceOpener(Protocol):
    """Opens the file a ``sourceUrl`` names, or refuses it before fetching anything."""

    def open(self, url: str, max_bytes: int) -> AbstractAsyncContextManager[Fetched]:
        """The file at ``url`` while the context lasts. A declared size past ``max_bytes``
        (0: no limit) is refused before its body is read.

        Raises:
            BadRequest: a URL the service may not read (nothing fetched).
            BadGateway: the source is unreachable, failing or answers an error (also
                raised while the chunks are read).
            PayloadTooLarge: the source declares more than ``max_bytes``.
        """
        ...
