"""Which backend owns an operation: a bounded cache with sliding expiry."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

DEFAULT_MAX_ENTRIES = 100_000


class IdCache:
    """Operation id -> backend name; an entry lives ``ttl`` seconds after its last use.

    Every hit pushes the expiry out again (sliding expiration), so an operation that is being
    polled never falls back to a fan-out. The least recently used entries are dropped beyond
    ``max_entries``, so memory stays bounded however many operations pass through.

    Args:
        ttl: Seconds an entry lives after it was last stored or read.
        max_entries: Upper bound of the number of entries.
        clock: Monotonic seconds; injectable for tests.
    """

    def __init__(
        self,
        ttl: float,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def get(self, operation_id: str) -> str | None:
        """The owning backend, or None when unknown or expired; a hit slides the expiry."""
        entry = self._entries.get(operation_id)
        if entry is None:
            return None
        backend, expires = entry
        now = self._clock()
        if now >= expires:
            del self._entries[operation_id]
            return None
        self._entries[operation_id] = (backend, now + self._ttl)
        self._entries.move_to_end(operation_id)
        return backend

    def put(self, operation_id: str, backend: str) -> None:
        """Remember the owner of an operation."""
        self._entries[operation_id] = (backend, self._clock() + self._ttl)
        self._entries.move_to_end(operation_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
