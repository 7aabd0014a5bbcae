"""``Kept``: a bounded map of what a process keeps between reads or writes of the database
(counts, names already stored), safe to share between threads."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """At most ``size`` entries; putting one more drops the oldest."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: dict[K, V] = {}
        self._lock = threading.Lock()  # a database's reader threads share them

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, or None."""
        with self._lock:
            return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key`` (as the newest entry)."""
        with self._lock:
            self._items.pop(key, None)
            if len(self._items) >= self._size:
                self._items.pop(next(iter(self._items)))
            self._items[key] = value
