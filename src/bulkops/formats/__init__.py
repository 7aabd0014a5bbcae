"""Streaming readers of uploaded files: CSV, a JSON array of objects, JSON Lines and XLSX
(a worksheet), each also gzip-compressed.

Readers open the file in binary, decode it themselves and never hold more than the
current record, so multi-gigabyte files read in flat memory. Problems confined to one
row come back as a ``RawRow`` with ``error`` set; problems with the file as a whole
(missing header or required columns, bad encoding, malformed JSON array, broken workbook,
corrupt gzip stream) raise ``bulkops.errors.FileFormatError``. A gzip-compressed file is
known by its first bytes and decompressed as it is read (``base.open_file``).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from itertools import dropwhile, islice
from pathlib import Path

from bulkops.formats.base import FileFormat, RawRow, detect_format
from bulkops.formats.csvfile import chunk_csv, count_csv, read_csv, read_csv_header
from bulkops.formats.jsonarray import count_json, read_json
from bulkops.formats.jsonlines import chunk_jsonl, count_jsonl, read_jsonl
from bulkops.formats.limits import FileLimits, applied, check_rows

# ``formats.xlsx`` (and openpyxl, which it reads workbooks with) is imported where an XLSX
# file is read: a process that never reads one does not carry it.

__all__ = [
    "ChunkStart",
    "FileFormat",
    "FileLimits",
    "RawRow",
    "RowCount",
    "count_chunks",
    "count_rows",
    "detect_format",
    "read_header",
    "read_rows",
]


@dataclass(frozen=True, slots=True)
class ChunkStart:
    """Where a chunk of rows begins: its first row's number and the byte offset of that
    row's record (-1: unknown, the chunk is found by reading from the start)."""

    first_row: int
    offset: int


@dataclass(frozen=True, slots=True)
class RowCount:
    """The data rows of a file and where each chunk of them begins."""

    total: int
    chunks: tuple[ChunkStart, ...]


def read_rows(
    path: Path,
    fmt: FileFormat,
    *,
    columns: Sequence[str],
    required: Sequence[str] = (),
    keep_raw: bool = False,
    drop_empty: bool = False,
    column_map: Mapping[str, str] | None = None,
    delimiter: str | None = None,
    start: ChunkStart | None = None,
    limit: int | None = None,
    sheet: str | None = None,
) -> Generator[RawRow, None, None]:
    """Stream the data rows of a local file.

    File columns (CSV header names, JSON object keys) are matched to ``columns`` exactly,
    else case-insensitively, exact matches winning; unmatched file columns are ignored.
    CSV values stay strings (an empty cell is ``""``); JSON numbers are int or float; XLSX
    cells become the text a CSV cell would hold, empty cells left out (see ``formats.xlsx``).
    Validation happens lazily: errors about the file as a whole are raised by the first
    ``next()``, before any row is yielded, or later for faults found mid-file (bad
    encoding, malformed JSON). The file is closed when the iterator is exhausted, closed
    or garbage collected.

    Args:
        path: The local file.
        fmt: Its format (a plain ``"csv"``, ``"json"``, ``"jsonl"`` or ``"xlsx"`` too).
        columns: The row model's column names.
        required: Model columns a CSV or XLSX header must contain. JSON formats have no header,
            so missing keys are left for row validation to report.
        keep_raw: Also return each record under the file's own column names.
        drop_empty: Leave empty CSV cells out of ``values`` (an empty cell is a missing
            value); ``raw`` keeps them.
        column_map: File column -> model column, applied before matching (``raw`` keeps
            the file's own names).
        delimiter: The CSV delimiter; None detects it from the header line.
        start: Read from this chunk's first row on (rows before it are skipped).
        limit: Stop after this many rows.
        sheet: The XLSX worksheet to read (None: the first one); ignored for other formats.

    Yields:
        One ``RawRow`` per data row, numbered from 1.

    Raises:
        FileFormatError: The file cannot be read as a whole.
    """
    fmt = FileFormat(fmt)
    reader: Generator[RawRow, None, None]
    seek = None if start is None else (start.first_row, start.offset)
    if fmt is FileFormat.CSV:
        reader = read_csv(
            path,
            columns=columns,
            required=required,
            keep_raw=keep_raw,
            drop_empty=drop_empty,
            column_map=column_map,
            delimiter=delimiter,
            start=seek,
        )
    elif fmt is FileFormat.JSON:
        reader = read_json(path, columns=columns, keep_raw=keep_raw, column_map=column_map)
    elif fmt is FileFormat.XLSX:
        from bulkops.formats.xlsx import read_xlsx

        reader = read_xlsx(
            path,
            columns=columns,
            required=required,
            keep_raw=keep_raw,
            column_map=column_map,
            sheet=sheet,
            start=seek,
        )
    else:
        reader = read_jsonl(
            path, columns=columns, keep_raw=keep_raw, column_map=column_map, start=seek
        )
    if start is None and limit is None:
        return reader
    first = 1 if start is None else start.first_row
    # Rows before ``first`` are only read past when the reader could not seek to them.
    return _range(reader, first, limit)


def _range(
    reader: Generator[RawRow, None, None], first: int, limit: int | None
) -> Generator[RawRow, None, None]:
    try:
        rows = dropwhile(lambda raw: raw.number < first, reader)
        yield from rows if limit is None else islice(rows, limit)
    finally:
        reader.close()


def count_rows(
    path: Path,
    fmt: FileFormat,
    delimiter: str | None = None,
    sheet: str | None = None,
    *,
    limits: FileLimits | None = None,
) -> int:
    """Count the data rows ``read_rows`` would yield, streaming the file.

    CSV records are counted with the csv parser (quoted fields may span lines); a JSON
    array is parsed in full, so a malformed document fails here, before processing.

    Raises:
        FileFormatError: The file cannot be read as a whole, or it passes ``limits``
            (``ExpandedTooLarge``, ``TooManyRows``).
    """
    with applied(limits):
        total = _count_rows(path, FileFormat(fmt), delimiter, sheet)
        check_rows(total)
    return total


def _count_rows(path: Path, fmt: FileFormat, delimiter: str | None, sheet: str | None) -> int:
    if fmt is FileFormat.CSV:
        return count_csv(path, delimiter)
    if fmt is FileFormat.JSON:
        return count_json(path)
    if fmt is FileFormat.XLSX:
        from bulkops.formats.xlsx import count_xlsx

        return count_xlsx(path, sheet)
    return count_jsonl(path)


def read_header(
    path: Path, fmt: FileFormat, delimiter: str | None = None, sheet: str | None = None
) -> list[str] | None:
    """The column names of a CSV file's header row or an XLSX sheet's, or None for JSON
    formats.

    Raises:
        FileFormatError: A CSV file or XLSX sheet is empty or its header cannot be read.
    """
    fmt = FileFormat(fmt)
    if fmt is FileFormat.CSV:
        return read_csv_header(path, delimiter)
    if fmt is FileFormat.XLSX:
        from bulkops.formats.xlsx import read_xlsx_header

        return read_xlsx_header(path, sheet)
    return None


def count_chunks(
    path: Path,
    fmt: FileFormat,
    chunk_rows: int,
    delimiter: str | None = None,
    sheet: str | None = None,
    *,
    limits: FileLimits | None = None,
) -> RowCount:
    """Count the data rows as ``count_rows`` does and find where every ``chunk_rows`` rows
    a chunk begins: its first row and that row's byte offset, so a reader can seek there.

    A file that cannot be read from an offset (a JSON array, a CSV file with lone-CR line
    ends) is one chunk: reading every chunk from the start would cost more than it saves.

    Raises:
        FileFormatError: The file cannot be read as a whole, or it passes ``limits``
            (``ExpandedTooLarge``, ``TooManyRows``).
    """
    with applied(limits):
        counted = _count_chunks(path, FileFormat(fmt), chunk_rows, delimiter, sheet)
        check_rows(counted.total)
    return counted


def _count_chunks(
    path: Path, fmt: FileFormat, chunk_rows: int, delimiter: str | None, sheet: str | None
) -> RowCount:
    size = max(chunk_rows, 0)
    if fmt is FileFormat.CSV:
        total, found = chunk_csv(path, size, delimiter)
    elif fmt is FileFormat.JSONL:
        total, found = chunk_jsonl(path, size)
    elif fmt is FileFormat.XLSX:
        from bulkops.formats.xlsx import chunk_xlsx

        total, found = chunk_xlsx(path, size, sheet)
    else:
        total, found = count_json(path), []
    starts = tuple(ChunkStart(first, offset) for first, offset in found)
    if len(starts) < 2 or any(start.offset < 0 for start in starts):
        starts = (ChunkStart(1, -1),)
    return RowCount(total, starts)
