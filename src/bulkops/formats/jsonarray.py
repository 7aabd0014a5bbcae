"""Streaming reader of a JSON file holding one top-level array of objects (ijson)."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import ijson

from bulkops.errors import FileFormatError
from bulkops.formats.base import (
    RAW_VALUE_KEY,
    UTF8_BOM,
    KeyMatcher,
    RawRow,
    not_utf8_message,
)

_WHITESPACE = b" \t\r\n"
_PROBE_BYTES = 64 * 1024


def _load_backend() -> ModuleType:
    # The C backend is several times faster than the others; ijson's own choice otherwise.
    try:
        backend: ModuleType = ijson.get_backend("yajl2_c")
    except ImportError:
        backend = ijson
    return backend


_BACKEND = _load_backend()


def _expect_array(fh: BinaryIO) -> None:
    """Check that the document starts with ``[`` and position ``fh`` after any BOM.

    ijson silently yields nothing for ``item`` when the top level is an object, so the
    shape has to be checked up front.
    """
    start = 0
    chunk = fh.read(_PROBE_BYTES)
    if chunk.startswith(UTF8_BOM):
        start, chunk = len(UTF8_BOM), chunk[len(UTF8_BOM) :]
    first = chunk.lstrip(_WHITESPACE)
    while not first and chunk:
        chunk = fh.read(_PROBE_BYTES)
        first = chunk.lstrip(_WHITESPACE)
    if not first:
        raise FileFormatError("File is empty: expected a JSON array of objects")
    if not first.startswith(b"["):
        raise FileFormatError("JSON file must hold a top-level array of objects")
    fh.seek(start)


def _failure(exc: Exception, row: int) -> FileFormatError:
    """Translate an ijson error into a file failure that names the row being parsed."""
    detail = exc.args[0] if exc.args else exc
    text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    # yajl appends a multi-line excerpt with a caret; its first line is the message.
    summary = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    # yajl reports bad UTF-8 as a lexical error, the Python backend as a codec error.
    if isinstance(exc, UnicodeDecodeError) or "UTF8" in summary or "can't decode" in summary:
        return FileFormatError(not_utf8_message(row), row)
    return FileFormatError(f"Invalid JSON near row {row}: {summary}", row)


def _elements(fh: BinaryIO) -> Iterator[Any]:
    _expect_array(fh)
    return iter(_BACKEND.items(fh, "item", use_float=True))


def read_json(
    path: Path, *, columns: Sequence[str], keep_raw: bool
) -> Generator[RawRow, None, None]:
    """Stream the elements of a JSON array file (see ``bulkops.formats.read_rows``)."""
    matcher = KeyMatcher(columns)
    with path.open("rb") as fh:
        elements = _elements(fh)
        number = 0
        try:
            for element in elements:
                number += 1
                if isinstance(element, dict):
                    raw = element if keep_raw else None
                    yield RawRow(number, matcher.values(element, copy=keep_raw), raw)
                else:
                    yield RawRow(
                        number,
                        None,
                        {RAW_VALUE_KEY: element},
                        f"Row {number}: JSON element is not an object",
                    )
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise _failure(exc, number + 1) from exc


def count_json(path: Path) -> int:
    """Count the elements of the top-level array, checking the whole document parses."""
    with path.open("rb") as fh:
        elements = _elements(fh)
        count = 0
        try:
            for _ in elements:
                count += 1
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise _failure(exc, count + 1) from exc
        return count
