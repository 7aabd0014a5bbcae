"""Streaming reader of JSON Lines: one JSON object per line, blank lines skipped."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from bulkops.errors import FileFormatError
from bulkops.formats.base import (
    RAW_LINE_KEY,
    RAW_VALUE_KEY,
    UTF8_BOM,
    KeyMatcher,
    RawRow,
    clip,
    not_utf8_message,
)

# JSON's own whitespace. Counting and reading must agree on what a blank line is, so both
# strip exactly these characters (str.strip() would also drop Unicode spaces).
_WS_TEXT = " \t\r\n"
_WS_BYTES = b" \t\r\n"

# raw_decode skips json.loads' two regex scans per call, which is most of its cost on
# short lines; trailing data is checked by hand below.
_raw_decode = json.JSONDecoder().raw_decode


def _skip_bom(fh: BinaryIO) -> None:
    if fh.read(len(UTF8_BOM)) != UTF8_BOM:
        fh.seek(0)


def _bad_line(number: int, text: str) -> RawRow:
    """The row for a line that is not a single JSON object."""
    try:
        value, end = _raw_decode(text)
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON ({exc.msg} at column {exc.colno})"
        return RawRow(number, None, {RAW_LINE_KEY: clip(text)}, f"Row {number}: {problem}")
    except (ValueError, RecursionError) as exc:
        # e.g. an integer beyond Python's digit limit, or absurd nesting.
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
    path: Path, *, columns: Sequence[str], keep_raw: bool
) -> Generator[RawRow, None, None]:
    """Stream the lines of a JSON Lines file (see ``bulkops.formats.read_rows``)."""
    matcher = KeyMatcher(columns)
    with path.open("rb") as fh:
        _skip_bom(fh)
        number = 0
        for line in fh:
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
    """Count the non-blank lines, as ``read_jsonl`` numbers them."""
    count = 0
    with path.open("rb") as fh:
        _skip_bom(fh)
        for line in fh:
            if line.strip(_WS_BYTES):
                count += 1
    return count
