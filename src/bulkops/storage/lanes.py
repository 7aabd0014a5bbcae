"""Lanes of reads: processing reads on connections of its own, apart from the API's.

A combined ``serve`` answers readers and processes rows in one process. On SQLite each
kind of read goes through one connection on one thread; were processing's reads (the
status a run checks, the stored rows a chunk resumes from) queued behind those of eight
clients polling in closed loops, the readers would set the pace of processing. The engine
marks its tasks with ``enter_processing_lane``; the SQL store sends their reads to threads
of their own.
"""

from __future__ import annotations

from contextvars import ContextVar

_PROCESSING: ContextVar[bool] = ContextVar("bulkops_processing_lane", default=False)


def enter_processing_lane() -> None:
    """Mark the current task (and the tasks it starts from now on) as processing."""
    _PROCESSING.set(True)


def in_processing_lane() -> bool:
    """Whether the current task reads on behalf of processing."""
    return _PROCESSING.get()
