"""Streaming CSV reader: UTF-8 (BOM optional), header row required, strict quoting."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from bulkops.definition.controls import CSV_DELIMITERS
from bulkops.errors import FileFormatError
from bulkops.formats.base import (
    MAX_RECORD_BYTES,
    RAW_EXTRA_KEY,
    RAW_LINE_KEY,
    UTF8_BOM,
    RawRow,
    bounded_lines,
    clip,
    column_positions,
    decoded_blocks,
    not_utf8_message,
    open_file,
    scan_lines,
    too_large_message,
)

# How much of the file is inspected to tell classic Mac (lone CR) line ends apart.
_PROBE_BYTES = 64 * 1024


class _Oversized(Exception):
    """A record grew past ``MAX_RECORD_BYTES``; the lines it spans were read past."""


class _Lines:
    """Text lines of the file for ``csv.reader``, BOM removed, each record bounded.

    Lines are split on LF in binary and decoded one by one: that is faster than a text
    layer and makes a decoding error point at the exact line. UTF-8 never puts an LF byte
    inside a multi-byte character, so the split is safe. Files that end lines with a lone
    CR only go through the text layer, which is the only one that splits on CR.

    A record (one line, or several inside quotes) larger than ``MAX_RECORD_BYTES`` raises
    ``_Oversized`` once, after its lines were read past without keeping them; the caller
    reports one failed row and reading goes on. With ``track``, every line handed to csv
    is kept until ``new_record()``, so a record csv rejects can be reported with its text.
    """

    def __init__(self, fh: BinaryIO, *, track: bool) -> None:
        head = fh.read(_PROBE_BYTES)
        fh.seek(len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0)
        self.delimiter = detect_delimiter(head.decode("utf-8", "ignore"))
        self._lines: Iterator[bytes | str | None]
        self._text: io.TextIOWrapper | None = None
        if b"\r" in head and b"\n" not in head:
            text = self._text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
            self._lines = iter(lambda: text.readline(MAX_RECORD_BYTES + 1), "")
        else:
            self._lines = bounded_lines(fh)
        self._track = track
        self._fh = fh
        self.kept: list[str] = []
        self._size = 0

    @property
    def seekable(self) -> bool:
        """Records can be found again by byte offset (not through the text layer)."""
        return self._text is None

    def tell(self) -> int:
        """The byte offset of the next line to read (``seekable`` files only)."""
        return self._fh.tell()

    def seek(self, offset: int) -> None:
        """Read on from a record found earlier at byte ``offset``."""
        self._fh.seek(offset)
        self.new_record()

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, *_: object) -> None:
        if self._text is not None:  # the caller closes the file, not the text layer
            self._text.detach()

    def new_record(self) -> None:
        """The previous record is complete."""
        self.kept.clear()
        self._size = 0

    def __iter__(self) -> _Lines:
        return self

    def rest(self) -> Iterator[str]:
        """The lines from here on, for a new ``csv.reader``: whole blocks of lines at a
        time while every line is one record csv accepts (see ``_plain``), then one checked
        and kept line at a time from the first block that is not like that.

        Most files are plain from their first line to their last, so most rows reach
        csv.reader in blocks, without a check of their own.
        """
        if not self.seekable:
            return self
        blocks = decoded_blocks(self._fh, _plain, longest=csv.field_size_limit())
        return itertools.chain(itertools.chain.from_iterable(blocks), self)

    def __next__(self) -> str:
        line = next(self._lines)
        if line is None or len(line) > MAX_RECORD_BYTES:
            self._read_past(line)
        text = line.decode() if isinstance(line, bytes) else line
        self._size += len(text)
        if self._size > MAX_RECORD_BYTES:
            self._read_past(text)
        if self._track:
            self.kept.append(text)
        return text

    def _read_past(self, line: bytes | str | None) -> NoReturn:
        if isinstance(line, str) and not line.endswith(("\n", "\r")):
            for rest in self._lines:  # the rest of a long line of a text-layer file
                if not isinstance(rest, str) or rest.endswith(("\n", "\r")):
                    break
        self.new_record()
        raise _Oversized


def _plain(text: bytes, cut: int) -> bool:
    """No quote and no lone CR in ``text[:cut]``: each line is one record, and csv cannot
    reject one unless it is longer than a field may be (checked after decoding)."""
    if text.find(b'"', 0, cut) >= 0:
        return False
    crs = text.count(b"\r", 0, cut)
    return not crs or crs == text.count(b"\r\n", 0, cut)


def detect_delimiter(head: str) -> str:
    """The delimiter of the header line in ``head``: the most frequent of comma,
    semicolon, tab and pipe outside quotes (comma when none appears, or on a tie)."""
    line = next((part for part in head.lstrip("\ufeff").splitlines() if part.strip()), "")
    outside = "".join(line.split('"')[::2])  # drop quoted parts
    counts = [(outside.count(d), -rank, d) for rank, d in enumerate(CSV_DELIMITERS)]
    best = max(counts)
    return best[2] if best[0] > 0 else ","


def _read_header(reader: Iterator[list[str]]) -> list[str]:
    try:
        for record in reader:
            if record:
                return record
    except csv.Error as exc:
        raise FileFormatError(f"Invalid CSV header: {exc}", row_number=0) from exc
    except UnicodeDecodeError as exc:
        raise FileFormatError("File is not valid UTF-8 (in the header row)", 0) from exc
    except _Oversized:
        raise FileFormatError(
            f"The header row is larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB", 0
        ) from None
    raise FileFormatError("File is empty: a CSV file needs a header row")


def _values(record: list[str], pairs: list[tuple[str, int]], drop_empty: bool) -> dict[str, Any]:
    present = len(record)
    if drop_empty:
        return {name: value for name, i in pairs if i < present and (value := record[i]) != ""}
    return {name: record[i] for name, i in pairs if i < present}


def _uneven_row(
    number: int,
    record: list[str],
    header: list[str],
    pairs: list[tuple[str, int]],
    keep_raw: bool,
    drop_empty: bool,
) -> RawRow:
    """A record whose field count differs from the header's."""
    width, present = len(header), len(record)
    if present > width:
        extra: dict[str, Any] = dict(zip(header, record, strict=False))
        extra[RAW_EXTRA_KEY] = record[width:]
        problem = f"expected {width} fields, found {present}"
        return RawRow(number, None, extra, f"Row {number}: {problem}")
    # A short record: the absent columns are left out, so validation names them.
    raw = dict(zip(header, record, strict=False)) if keep_raw else None
    return RawRow(number, _values(record, pairs, drop_empty), raw)


def read_csv(
    path: Path,
    *,
    columns: Sequence[str],
    required: Sequence[str],
    keep_raw: bool,
    drop_empty: bool = False,
    column_map: Mapping[str, str] | None = None,
    delimiter: str | None = None,
    start: tuple[int, int] | None = None,
) -> Generator[RawRow, None, None]:
    """Stream the data rows of a CSV file (see ``bulkops.formats.read_rows``); with
    ``start`` (row number, byte offset from ``chunk_csv``), from that row on."""
    with open_file(path) as fh, _Lines(fh, track=True) as lines:
        reader = csv.reader(lines, strict=True, delimiter=delimiter or lines.delimiter)
        header = _read_header(reader)
        lines.new_record()
        pairs = column_positions(header, columns, required, column_map)
        width = len(header)
        number = 0
        if start is not None and start[1] >= 0 and lines.seekable:
            # csv.reader pulls exactly a record's lines, so it reads on from the offset.
            number = start[0] - 1
            lines.seek(start[1])
        reader = csv.reader(lines.rest(), strict=True, delimiter=reader.dialect.delimiter)
        while True:
            try:
                for record in reader:
                    lines.new_record()
                    if not record:
                        continue  # a blank line
                    number += 1
                    if len(record) == width:
                        raw = dict(zip(header, record, strict=True)) if keep_raw else None
                        if drop_empty:
                            values = {n: v for n, i in pairs if (v := record[i]) != ""}
                        else:
                            values = {n: record[i] for n, i in pairs}
                        yield RawRow(number, values, raw)
                    else:
                        yield _uneven_row(number, record, header, pairs, keep_raw, drop_empty)
                return
            except csv.Error as exc:
                # csv drops the rest of the offending line and carries on with the next one.
                number += 1
                text = clip("".join(lines.kept))
                lines.new_record()
                yield RawRow(number, None, {RAW_LINE_KEY: text}, f"Row {number}: {exc}")
            except _Oversized:
                number += 1
                yield RawRow(number, None, {RAW_LINE_KEY: ""}, too_large_message(number))
            except UnicodeDecodeError as exc:
                raise FileFormatError(not_utf8_message(number + 1), number + 1) from exc


def count_csv(path: Path, delimiter: str | None = None) -> int:
    """Count the data rows of a CSV file as ``read_csv`` numbers them."""
    return chunk_csv(path, 0, delimiter)[0]


def chunk_csv(
    path: Path, chunk_rows: int, delimiter: str | None = None
) -> tuple[int, list[tuple[int, int]]]:
    """Count the data rows as ``read_csv`` numbers them and, with ``chunk_rows``, find
    where rows 1, 1 + chunk_rows, ... begin: (row number, byte offset; -1 when the file
    cannot be read from an offset).

    Without a quote after the header every non-blank line is one record, and the lines
    are counted in blocks; otherwise the csv parser counts the records.
    """
    with open_file(path) as fh, _Lines(fh, track=False) as lines:
        _read_header(csv.reader(lines, strict=True, delimiter=delimiter or lines.delimiter))
        if lines.seekable:
            fh.seek(lines.tell())
            counted = scan_lines(fh, chunk_rows, blank=b"\r", usable=_one_record_a_line)
            if counted is not None:
                return counted
    return _parse_chunks(path, chunk_rows, delimiter)


def _one_record_a_line(lines: bytes) -> bool:
    """No quoted field can span lines, and every CR ends a line with its LF."""
    if b'"' in lines:
        return False
    return b"\r" not in lines or lines.count(b"\r") == lines.count(b"\r\n")


def _parse_chunks(
    path: Path, chunk_rows: int, delimiter: str | None
) -> tuple[int, list[tuple[int, int]]]:
    """``chunk_csv`` by parsing every record."""
    with open_file(path) as fh, _Lines(fh, track=False) as lines:
        reader = csv.reader(lines, strict=True, delimiter=delimiter or lines.delimiter)
        _read_header(reader)
        seekable = lines.seekable
        starts: list[tuple[int, int]] = []
        count = 0
        before = lines.tell() if seekable else -1  # where the next record begins
        while True:
            try:
                for record in reader:
                    lines.new_record()
                    if record:
                        count += 1
                        if chunk_rows and count % chunk_rows == 1 % chunk_rows:
                            starts.append((count, before))
                    if seekable:
                        before = lines.tell()
                return count, starts
            except (csv.Error, _Oversized):
                lines.new_record()
                count += 1  # read_csv reports it as a row with an error
                if chunk_rows and count % chunk_rows == 1 % chunk_rows:
                    starts.append((count, before))
                if seekable:
                    before = lines.tell()
            except UnicodeDecodeError as exc:
                raise FileFormatError(not_utf8_message(count + 1), count + 1) from exc


def read_csv_header(path: Path, delimiter: str | None = None) -> list[str]:
    """The header row of a CSV file (BOM removed)."""
    with open_file(path) as fh, _Lines(fh, track=False) as lines:
        return _read_header(csv.reader(lines, strict=True, delimiter=delimiter or lines.delimiter))
