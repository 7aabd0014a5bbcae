"""Lanes of reads: processing reads on connections of its own, apart from the API's.

A combined ``serve`` answers readers and processes rows in one process. On SQLite each
kind of read goes through one connection on one thread; were processing's reads (the
status a run checks, the stored rows a chunk resumes from) queued behind those of eight
clients polling in closed loops, the readers would set the pace of processing. The engine
marks its tasks with ``enter_processing_lane``; the SQL store sends their reads to threads
of their own, and notes when processing last wrote (``LaneActivity``), which tells the
API whether processing is active in this process.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar

_PROCESSING: ContextVar[bool] = ContextVar("bulkops_processing_lane", default=False)


def enter_processing_lane() -> None:
    """Mark the current task (and the tasks it starts from now on) as processing."""
    _PROCESSING.set(True)


def in_processing_lane() -> bool:
    """Whether the current task reads on behalf of processing."""
    return _PROCESSING.get()


# Seconds after processing's last write during which it counts as active. A run records
# its finished rows at least every ``BULKOPS_FLUSH_INTERVAL`` (0.5 s by default); the
# pollers that look for work only read, so an idle process does not count as active.
ACTIVE_FOR = 1.0


class LaneActivity:
    """When processing last wrote to storage in this process."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = -math.inf

    def note(self) -> None:
        """Called by storage at each write: counted when made in the processing lane."""
        if _PROCESSING.get():
            self._last = time.monotonic()

    def active(self) -> bool:
        """Processing wrote within the last ``ACTIVE_FOR`` seconds."""
        return time.monotonic() - self._last < ACTIVE_FOR
