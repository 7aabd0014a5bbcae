"""A worker process's tie to ``serve``: what it is to do, and its death with ``serve``.

``serve`` writes the worker process's ``Assignment`` to its stdin and keeps the pipe open
for as long as it lives. The worker process reads it, then:

- asks Linux to kill it when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), and
  checks that the parent did not die before it asked;
- waits for the end of its stdin on a thread: the pipe's end means ``serve`` is gone
  (killed, even by ``kill -9``), and the process ends at once, wherever Linux's signal
  is not to be had.

Its work is then taken over like that of any dead worker: at once on one host (its
process id no longer runs) or on PostgreSQL (its session is gone).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import struct
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from bulkops.settings import Settings

PR_SET_PDEATHSIG = 1  # linux/prctl.h
EXIT_ORPHANED = 70  # the exit code of a worker process whose serve is gone
_LENGTH = struct.Struct("!I")


@dataclass(frozen=True, slots=True)
class Assignment:
    """What ``serve`` tells one of its worker processes."""

    name: str  # "worker-1": the tag of its log lines
    settings: Settings
    wakeups: Path  # the directory of the wake-up sockets
    ready: Path  # the directory where it says it is processing (a file named by its pid)
    parent: int  # serve's process id


def encode(assignment: Assignment) -> bytes:
    """The bytes that hand ``assignment`` over (written to the worker process's stdin)."""
    body = pickle.dumps(assignment)
    return _LENGTH.pack(len(body)) + body


def receive() -> Assignment:
    """Read the assignment from stdin and tie this process's life to its parent's."""
    head = _read_exactly(_LENGTH.size)
    assignment: Assignment = pickle.loads(_read_exactly(_LENGTH.unpack(head)[0]))
    _die_with_parent(assignment.parent)
    threading.Thread(target=_watch_stdin, name="lifeline", daemon=True).start()
    return assignment


def report_ready(assignment: Assignment) -> None:
    """Tell ``serve`` this process is processing."""
    (assignment.ready / str(os.getpid())).touch()


def _read_exactly(size: int) -> bytes:
    parts, left = [], size
    while left:
        part = os.read(0, left)
        if not part:
            os._exit(EXIT_ORPHANED)  # serve went away before it said what to do
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the stdin watch is enough
    if os.getppid() != parent:  # serve died before the signal was asked for
        os._exit(EXIT_ORPHANED)


def _watch_stdin() -> None:
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(EXIT_ORPHANED)
