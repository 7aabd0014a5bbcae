"""Streaming CSV reader: UTF-8 (BOM optional), header row required, strict quoting."""

from __future__ import annotations

import csv
import io
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from bulkops.errors import FileFormatError
from bulkops.formats.base import (
    RAW_EXTRA_KEY,
    RAW_LINE_KEY,
    UTF8_BOM,
    RawRow,
    clip,
    match_columns,
    not_utf8_message,
)

# How much of the file is inspected to tell classic Mac (lone CR) line ends apart.
_PROBE_BYTES = 64 * 1024


def _decoded_lines(fh: BinaryIO, track: list[str] | None) -> Iterator[str]:
    """Text lines of the file for csv.reader, BOM removed.

    Lines are split on LF in binary and decoded one by one: that is faster than a text
    layer and makes a decoding error point at the exact line. UTF-8 never puts an LF byte
    inside a multi-byte character, so the split is safe. Files that end lines with a lone
    CR only go through the text layer, which is the only one that splits on CR.
    When ``track`` is given, every line handed to csv is appended to it, so a record csv
    rejects can still be reported with its text.
    """
    head = fh.read(_PROBE_BYTES)
    fh.seek(len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0)
    lines: Iterator[str]
    if b"\r" in head and b"\n" not in head:
        lines = iter(io.TextIOWrapper(fh, encoding="utf-8", newline=""))
    else:
        lines = map(bytes.decode, fh)
    if track is None:
        return lines
    keep = track.append

    def tracked(line: str) -> str:
        keep(line)
        return line

    return map(tracked, lines)


def _read_header(reader: Iterator[list[str]]) -> list[str]:
    try:
        for record in reader:
            if record:
                return record
    except csv.Error as exc:
        raise FileFormatError(f"Invalid CSV header: {exc}", row_number=0) from exc
    except UnicodeDecodeError as exc:
        raise FileFormatError("File is not valid UTF-8 (in the header row)", 0) from exc
    raise FileFormatError("File is empty: a CSV file needs a header row")


def _column_pairs(
    header: Sequence[str], columns: Sequence[str], required: Sequence[str]
) -> list[tuple[str, int]]:
    found = match_columns(header, [*columns, *required])
    missing = [name for name in dict.fromkeys(required) if name not in found]
    if missing:
        raise FileFormatError(f"Missing required column(s): {', '.join(missing)}")
    return [(name, found[name]) for name in dict.fromkeys(columns) if name in found]


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
) -> Generator[RawRow, None, None]:
    """Stream the data rows of a CSV file (see ``bulkops.formats.read_rows``)."""
    with path.open("rb") as fh:
        lines: list[str] = []
        reader = csv.reader(_decoded_lines(fh, lines), strict=True)
        header = _read_header(reader)
        lines.clear()
        pairs = _column_pairs(header, columns, required)
        width = len(header)
        number = 0
        while True:
            try:
                for record in reader:
                    lines.clear()
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
                text = clip("".join(lines))
                lines.clear()
                yield RawRow(number, None, {RAW_LINE_KEY: text}, f"Row {number}: {exc}")
            except UnicodeDecodeError as exc:
                raise FileFormatError(not_utf8_message(number + 1), number + 1) from exc


def count_csv(path: Path) -> int:
    """Count the data rows of a CSV file as ``read_csv`` numbers them."""
    with path.open("rb") as fh:
        reader = csv.reader(_decoded_lines(fh, None), strict=True)
        _read_header(reader)
        count = 0
        while True:
            try:
                for record in reader:
                    if record:
                        count += 1
                return count
            except csv.Error:
                count += 1  # read_csv reports it as a row with an error
            except UnicodeDecodeError as exc:
                raise FileFormatError(not_utf8_message(count + 1), count + 1) from exc


def read_csv_header(path: Path) -> list[str]:
    """The header row of a CSV file (BOM removed)."""
    with path.open("rb") as fh:
        return _read_header(csv.reader(_decoded_lines(fh, None), strict=True))
