"""Limits of what one file may cost when it is read: the bytes a compressed file expands
to, and its rows.

A gzip upload or an XLSX workbook (a zip) can expand a thousandfold, so the upload limit,
which counts the bytes sent, does not bound what reading them costs. ``FileLimits`` does:
the bytes a gzip stream decompresses to, and the bytes of a workbook's worksheet and
shared strings as they are actually decompressed (a zip directory's sizes are the
sender's word, so they are not trusted), and the data rows counted. A read under limits
(``applied``) that passes one raises ``ExpandedTooLarge`` or ``TooManyRows``: both are
``FileFormatError``, so an operation whose file passes one while its rows are counted
fails with the message, before any row runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO, Any

from bulkops.errors import FileFormatError

__all__ = [
    "ExpandedTooLarge",
    "FileLimits",
    "Meter",
    "TooManyRows",
    "applied",
    "check_rows",
    "current",
]


@dataclass(frozen=True, slots=True)
class FileLimits:
    """What reading one file may cost; 0 is no limit.

    Attributes:
        expanded_bytes: The bytes a compressed file may expand to (a gzip stream; a
            workbook's worksheet and shared strings together).
        rows: The data rows of one file.
    """

    expanded_bytes: int = 0
    rows: int = 0


class ExpandedTooLarge(FileFormatError):
    """The file expands to more bytes than ``FileLimits.expanded_bytes``."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The file expands to more than {limit} bytes when decompressed: the limit is "
            f"{limit} bytes (BULKOPS_MAX_EXPANDED_BYTES)"
        )
        self.limit = limit


class TooManyRows(FileFormatError):
    """The file has more data rows than ``FileLimits.rows``."""

    def __init__(self, limit: int, rows: int | None = None) -> None:
        counted = "more" if rows is None else f"{rows}"
        super().__init__(
            f"The file has {counted} data rows: the limit is {limit} rows per file "
            "(BULKOPS_MAX_FILE_ROWS)"
        )
        self.limit = limit


# The limits of the read in progress: set around it (``applied``), read by the streams
# that decompress (``base.open_file``, the workbook's parts) wherever they are opened, so
# every reader is bounded without each passing the limits on. Threads started with
# ``asyncio.to_thread`` inherit it.
_CURRENT: ContextVar[FileLimits | None] = ContextVar("bulkops_file_limits", default=None)
_NONE = FileLimits()


def current() -> FileLimits:
    """The limits of the read in progress (none: no limit)."""
    return _CURRENT.get() or _NONE


@contextmanager
def applied(limits: FileLimits | None) -> Iterator[FileLimits]:
    """Read under ``limits`` within the block (None: as before)."""
    if limits is None:
        yield current()
        return
    token = _CURRENT.set(limits)
    try:
        yield limits
    finally:
        _CURRENT.reset(token)


def check_rows(rows: int) -> None:
    """Raise ``TooManyRows`` when ``rows`` passes the rows limit in force."""
    limit = current().rows
    if limit and rows > limit:
        raise TooManyRows(limit, rows)


class Meter:
    """The decompressed bytes of one file, across the streams it is read through: each
    stream counts the furthest position it reached (a seek back and a second pass count
    once), and the sum of them may not pass the limit."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = current().expanded_bytes if limit is None else limit
        self._reached: list[int] = []  # the furthest position of each stream, in order

    def reached(self, stream: int, position: int) -> None:
        """Stream number ``stream`` (``metered`` numbers them) has been read up to
        ``position``."""
        if position <= self._reached[stream]:
            return
        self._reached[stream] = position
        if self.limit and sum(self._reached) > self.limit:
            raise ExpandedTooLarge(self.limit)

    def metered(self, stream: IO[bytes]) -> IO[bytes]:
        """``stream``, counted by this meter as it is read (itself without a limit)."""
        if not self.limit:
            return stream
        self._reached.append(0)
        return _Metered(stream, self, len(self._reached) - 1)  # type: ignore[return-value]


class _Metered:
    """A binary stream that tells its meter how far it has been read."""

    def __init__(self, stream: IO[bytes], meter: Meter, number: int) -> None:
        self._stream = stream
        self._meter = meter
        self._number = number

    def _after(self, data: bytes) -> bytes:
        self._meter.reached(self._number, self._stream.tell())
        return data

    def read(self, size: int = -1) -> bytes:
        return self._after(self._stream.read(size))

    def read1(self, size: int = -1) -> bytes:
        return self._after(self._stream.read1(size))  # type: ignore[attr-defined]

    def readline(self, size: int = -1) -> bytes:
        return self._after(self._stream.readline(size))

    def readinto(self, buffer: Any) -> int:
        count: int = self._stream.readinto(buffer)  # type: ignore[attr-defined]
        self._meter.reached(self._number, self._stream.tell())
        return count

    def seek(self, offset: int, whence: int = 0) -> int:
        position = self._stream.seek(offset, whence)
        self._meter.reached(self._number, position)
        return position

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line

    def __enter__(self) -> _Metered:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
