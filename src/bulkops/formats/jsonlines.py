"""Streaming reader of JSON Lines: one JSON object per line, blank lines skipped."""

from __future__ import annotations

import itertools
import json
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from bulkops.errors import FileFormatError
from bulkops.formats.base import (
    RAW_LINE_KEY,
    RAW_VALUE_KEY,
    UTF8_BOM,
    KeyMatcher,
    RawRow,
    bounded_lines,
    clip,
    decode_json,
    decoded_blocks,
    not_utf8_message,
    open_file,
    scan_lines,
    too_deep_message,
    too_large_message,
)

# JSON's own whitespace. Counting and reading must agree on what a blank line is, so both
# strip exactly these characters (str.strip() would also drop Unicode spaces).
_WS_TEXT = " \t\r\n"

# raw_decode skips json.loads' two regex scans per call, which is most of its cost on
# short lines; trailing data is checked by hand below.
_raw_decode = decode_json


def _lines(fh: BinaryIO) -> Iterator[bytes | None]:
    """The file's lines after any BOM; None stands for a line too long to hold."""
    if fh.read(len(UTF8_BOM)) != UTF8_BOM:
        fh.seek(0)
    return bounded_lines(fh)


def _bad_line(number: int, text: str) -> RawRow:
    """The row for a line that is not a single JSON object."""
    try:
        value, end = _raw_decode(text)
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON ({exc.msg} at column {exc.colno})"
        return RawRow(number, None, {RAW_LINE_KEY: clip(text)}, f"Row {number}: {problem}")
    except RecursionError:
        return RawRow(number, None, {RAW_LINE_KEY: clip(text)}, too_deep_message(number))
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit, or NaN
        return RawRow(number, None, {RAW_LINE_KEY: clip(text)}, f"Row {number}: {exc}")
    if end != len(text):
        return RawRow(
            number,
            None,
            {RAW_LINE_KEY: clip(text)},
            f"Row {number}: unexpected data after the JSON value (column {end + 1})",
        )
    return RawRow(number, None, {RAW_VALUE_KEY: value}, f"Row {number}: JSON line is not an object")


def read_jsonl(
    path: Path,
    *,
    columns: Sequence[str],
    keep_raw: bool,
    column_map: Mapping[str, str] | None = None,
    start: tuple[int, int] | None = None,
) -> Generator[RawRow, None, None]:
    """Stream the lines of a JSON Lines file (see ``bulkops.formats.read_rows``); with
    ``start`` (row number, byte offset from ``chunk_jsonl``), from that row on."""
    matcher = KeyMatcher(columns, column_map)
    with open_file(path) as fh:
        number = 0
        by_line = _lines(fh)
        if start is not None and start[1] >= 0:
            number = start[0] - 1
            fh.seek(start[1])  # the line generator reads on from there
        # Decoded blocks of lines while they are UTF-8 and short, then line by line.
        lines: Iterator[str | bytes | None] = itertools.chain(
            itertools.chain.from_iterable(decoded_blocks(fh)), by_line
        )
        for line in lines:
            if line is None:
                number += 1
                yield RawRow(number, None, {RAW_LINE_KEY: ""}, too_large_message(number))
                continue
            if isinstance(line, str):
                text = line.strip(_WS_TEXT)
            else:
                try:
                    text = line.decode("utf-8").strip(_WS_TEXT)
                except UnicodeDecodeError as exc:
                    raise FileFormatError(not_utf8_message(number + 1), number + 1) from exc
            if not text:
                continue
            number += 1
            obj: Any
            try:
                obj, end = _raw_decode(text)
            except (ValueError, RecursionError):
                obj, end = None, -1
            if end == len(text) and isinstance(obj, dict):
                yield RawRow(number, matcher.values(obj, copy=keep_raw), obj if keep_raw else None)
            else:
                # Parse again to describe the problem; only bad lines pay for it.
                yield _bad_line(number, text)


def count_jsonl(path: Path) -> int:
    """Count the non-blank lines, as ``read_jsonl`` numbers them, checking the encoding."""
    return chunk_jsonl(path, 0)[0]


def chunk_jsonl(path: Path, chunk_rows: int) -> tuple[int, list[tuple[int, int]]]:
    """Count the rows as ``read_jsonl`` numbers them and, with ``chunk_rows``, find the
    byte offsets where rows 1, 1 + chunk_rows, ... begin (in blocks of lines when it can,
    line by line when a block is not valid UTF-8 or holds a line too long to read)."""
    with open_file(path) as fh:
        _lines(fh)  # past any BOM
        counted = scan_lines(fh, chunk_rows, blank=_WS_TEXT.encode())
    return _parse_chunks(path, chunk_rows) if counted is None else counted


def _parse_chunks(path: Path, chunk_rows: int) -> tuple[int, list[tuple[int, int]]]:
    """``chunk_jsonl`` line by line, naming the first line that is not UTF-8."""
    count = 0
    starts: list[tuple[int, int]] = []
    with open_file(path) as fh:
        lines = _lines(fh)
        before = fh.tell()
        for line in lines:
            if line is not None:
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FileFormatError(not_utf8_message(count + 1), count + 1) from exc
                if not text.strip(_WS_TEXT):
                    before = fh.tell()
                    continue
            count += 1
            if chunk_rows and count % chunk_rows == 1 % chunk_rows:
                starts.append((count, before))
            before = fh.tell()
    return count, starts
