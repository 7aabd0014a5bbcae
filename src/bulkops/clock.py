"""Time in one place: aware UTC timestamps."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class CoarseClock:
    """``utcnow()`` that hands out one datetime object per tick (default 1 ms).

    A fresh timestamp per row would cost about as much as validating the row; a tick is
    precise enough for row completion times, and reusing the object lets writers cache its
    encoding.
    """

    TICK = 0.001  # seconds

    def __init__(self, tick: float = TICK) -> None:
        self._tick = tick
        self._next = 0.0
        self._now = utcnow()

    def now(self) -> datetime:
        """The current time, at most one tick old."""
        moment = time.monotonic()
        if moment >= self._next:
            self._now = utcnow()
            self._next = moment + self._tick
        return self._now
