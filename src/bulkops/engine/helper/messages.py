"""What a row helper process and the process that started it say to each other.

Messages travel over the helper's stdin and stdout, each as a 4-byte big-endian length
and a pickle. Both ends are this package, started by one another over private pipes.

The parent sends ``Hello`` once, then a ``Job`` at a time, and ``Stop`` to end a job
early; the helper answers ``Ready`` to the hello, ``Progress`` while a job runs and
``Finished`` at its end (after a stop too). ``HelperLost`` is what the parent hears when
the helper stops answering.
"""

from __future__ import annotations

import asyncio
import pickle
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from bulkops.storage.records import ChunkRecord, RowRecord
from bulkops.storage.spans import Span

_SIZE = 4


@dataclass(frozen=True, slots=True)
class Hello:
    """How to load the operations: the modules or files, from the parent's import path."""

    sources: list[str]
    sys_path: list[str]
    log_format: str
    log_level: int


@dataclass(frozen=True, slots=True)
class Ready:
    """The operations are loaded (or could not be: ``error``)."""

    error: str | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """Run the fresh rows of one chunk of an operation, in order. Its ``id`` (given by the
    parent, new for every job of a helper) marks the ``Stop``, ``Progress`` and ``Finished``
    that belong to it, so that none of them is ever taken for another job's."""

    operation_id: UUID
    operation: str
    metadata: dict[str, Any]
    path: str
    file_format: str
    column_map: dict[str, str] | None
    chunk: ChunkRecord
    report_interval: float  # seconds: progress at least this often while rows finish
    id: int = 0
    # Sent ahead to follow the job of its operation's chunk before: it never starts after
    # a job of its operation that was stopped or failed (its run goes on in the parent).
    ahead: bool = False
    created_by: str = ""  # the operation's creator, for current_row()
    sheet: str | None = None  # the XLSX worksheet read (None: the first)
    dry_run: bool = False  # validate the rows, run nothing
    # Rows of the chunk read from this data instead of the file (fixed rows of the
    # operation it was created from), by row number.
    fixes: dict[int, dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """End job ``job`` now (or never start it): the row running is cancelled, as a stopped
    run's would be. The jobs of the same operation queued behind it never start either:
    they were sent ahead to follow it, and its stop (a cancel, a shutdown) is theirs until
    their own runs say otherwise. A job stopped before it started is answered at once
    (``Finished``, stopped), not when its turn would have come.

    ``withdraw``: only if it has not started (the parent would rather run it itself than
    wait); a job already running goes on as if nothing was said."""

    job: int
    withdraw: bool = False


@dataclass(slots=True)
class Progress:
    """Rows finished since the last progress of job ``job``: every row up to ``upto`` is
    reported now or before, and none after it."""

    job: int
    upto: int
    spans: list[Span] = field(default_factory=list)  # completed rows
    failed: list[RowRecord] = field(default_factory=list)
    latencies: list[int] = field(default_factory=list)  # per bucket of ROW_BUCKETS
    seconds: float = 0.0  # the rows' processing time in all


@dataclass(frozen=True, slots=True)
class Finished:
    """The job ended: every row ran, or it was stopped (``stopped``: told to, or queued
    behind a job of its operation that was), or the operation as a whole failed
    (``failure``: a fault of the file, an unknown operation, an internal error)."""

    job: int
    failure: str | None = None
    stopped: bool = False


Message = Hello | Ready | Job | Stop | Progress | Finished


class HelperLost(Exception):
    """The helper process exited, or stopped answering, during a job."""


async def send(writer: asyncio.StreamWriter, message: Message) -> None:
    """Write one message and wait until the pipe takes it."""
    write(writer, message)
    await writer.drain()


def write(writer: asyncio.StreamWriter, message: Message) -> None:
    """Put one message whole into the writer's buffer (``send`` without the wait)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(len(data).to_bytes(_SIZE, "big") + data)


async def receive(reader: asyncio.StreamReader) -> Message:
    """Read one message.

    Raises:
        asyncio.IncompleteReadError: the other end closed the pipe.
    """
    size = int.from_bytes(await reader.readexactly(_SIZE), "big")
    message: Message = pickle.loads(await reader.readexactly(size))
    return message
