"""Streaming reader of a JSON file holding one top-level array of objects.

The array is walked element by element over a text window refilled from the file, each
element decoded by the standard library's C scanner. Nesting is bounded by that scanner's
recursion guard and an element's size by ``MAX_RECORD_BYTES``, so memory stays flat
whatever the file holds (a general-purpose streaming parser tracks the path of every open
level and needs memory quadratic in the depth: 2 GB for 180 KB of brackets).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from bulkops.errors import FileFormatError
from bulkops.formats.base import (
    MAX_RECORD_BYTES,
    RAW_VALUE_KEY,
    KeyMatcher,
    RawRow,
    decode_json,
    not_utf8_message,
    open_file,
    too_deep_message,
    too_large_message,
)

_CHUNK = 256 * 1024
_WHITESPACE = re.compile(r"[ \t\r\n]*")
# What the skipping scan jumps over at C speed: runs without quotes or brackets, and runs
# inside a string without a quote or backslash.
_PLAIN = re.compile(r'[^"\[\]{},]*')
_OPENING = re.compile(r"[\[{]+")
_CLOSING = re.compile(r"[\]}]+")
_SEPARATOR = re.compile(r"[ \t\r\n]*([,\]])")
_IN_STRING = re.compile(r'[^"\\]*')
# Bytes that are not UTF-8 decode to these lone surrogates, so the walker can go on up to
# the bad spot and name the row it is in.
_UNDECODABLE = re.compile("[\udc80-\udcff]")


class _Skipped:
    """Stands for an element that was read past instead of decoded."""

    def __init__(self, message: str) -> None:
        self.message = message


class _ArrayWalker:
    """Yields the elements of the top-level array, or ``_Skipped`` for those too deep or
    too large to decode; raises ``FileFormatError`` for faults of the file as a whole."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")("surrogateescape")
        self._text = ""
        self._pos = 0
        self._eof = False
        self._bad: int | None = None  # where the first undecodable byte sits in the window
        self.row = 0  # the element being read, for messages

    def _fill(self) -> bool:
        """Append the next chunk to the window; False at the end of the file."""
        if self._eof:
            return False
        data = self._fh.read(_CHUNK)
        self._eof = not data
        more = self._decoder.decode(data, final=self._eof)
        kept = len(self._text) - self._pos
        if self._bad is not None:
            self._bad -= self._pos
        elif (found := _UNDECODABLE.search(more)) is not None:
            self._bad = kept + found.start()
        self._text = self._text[self._pos :] + more
        self._pos = 0
        return bool(more) or not self._eof

    def _check_decoded(self, end: int) -> None:
        """Refuse to go past an undecodable byte."""
        if self._bad is not None and self._bad < end:
            raise FileFormatError(not_utf8_message(self.row), self.row)

    def _peek(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            self._pos = _WHITESPACE.match(self._text, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._text):
                self._check_decoded(self._pos + 1)
                return self._text[self._pos]
            if not self._fill():
                return ""

    def elements(self) -> Iterator[Any]:
        """Every element of the array, in order."""
        first = self._peek()
        if not first:
            raise FileFormatError("File is empty: expected a JSON array of objects")
        if first != "[":
            raise FileFormatError("JSON file must hold a top-level array of objects")
        self._pos += 1
        if self._peek() == "]":
            self._pos += 1
        else:
            yield from self._items()
        self.row += 1
        if self._peek():
            raise self._invalid("unexpected data after the array")

    def _items(self) -> Iterator[Any]:
        # The hot loop: one decode and two regex matches per element, all in C. Anything
        # unusual (the window's end, a fault) leaves it for the careful path.
        whitespace, separator, decode = _WHITESPACE.match, _SEPARATOR.match, decode_json
        while True:
            self.row += 1
            text = self._text
            start = whitespace(text, self._pos).end()  # type: ignore[union-attr]
            try:
                value, end = decode(text, start)
                found = separator(text, end)
            except (ValueError, RecursionError):  # JSONDecodeError too
                found = None
            if found is None or (self._bad is not None and self._bad < found.end()):
                self._pos = start
                value = self._element()
                last = self._separator()
            else:
                self._pos = found.end()
                last = found.group(1) == "]"
            yield value
            if last:
                return

    def _separator(self) -> bool:
        """Consume the ',' or ']' after an element; True for ']'."""
        char = self._peek()
        self._pos += 1
        if char not in (",", "]"):
            raise self._invalid("expected ',' or ']' after an element")
        return char == "]"

    def _invalid(self, problem: str) -> FileFormatError:
        return FileFormatError(f"Invalid JSON near row {self.row}: {problem}", self.row)

    def _element(self) -> Any:
        self._peek()
        while True:
            try:
                value, end = decode_json(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if self._incomplete(exc):
                    if len(self._text) - self._pos > MAX_RECORD_BYTES:
                        return self._skip(too_large_message(self.row))
                    self._fill()
                    continue
                self._check_decoded(exc.pos + 1)
                raise self._invalid(exc.msg) from None
            except RecursionError:
                return self._skip(too_deep_message(self.row))
            except ValueError as exc:  # NaN, or an integer beyond Python's digit limit
                return self._skip(f"Row {self.row}: {exc}")
            if end == len(self._text) and self._fill():
                continue  # a number at the window's end may go on
            self._check_decoded(end)
            self._pos = end
            return value

    def _incomplete(self, exc: json.JSONDecodeError) -> bool:
        """True when more of the file may complete the element that failed to decode."""
        if self._eof:
            return False
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(self._text) - 6

    def _skip(self, message: str) -> _Skipped:
        """Read past one element without decoding it, keeping only the current chunk."""
        depth, in_string = 0, False
        while True:
            text, pos = self._text, self._pos
            while pos < len(text):
                if in_string:
                    pos, in_string = _after_string(text, pos)
                    if in_string:
                        break  # the window ends inside the string: read on first
                    continue
                pos = _PLAIN.match(text, pos).end()  # type: ignore[union-attr]
                if pos == len(text):
                    break
                char = text[pos]
                if char in ",]" and depth == 0:
                    self._check_decoded(pos)
                    self._pos = pos
                    return _Skipped(message)
                if char == "}" and depth == 0:
                    raise self._invalid("unexpected '}'")
                depth, pos, in_string = _structure(text, pos, depth)
            self._check_decoded(pos)
            self._pos = pos
            if not self._fill():
                raise self._invalid("the file ends inside an element")


def _after_string(text: str, pos: int) -> tuple[int, bool]:
    """Move through a string from inside it: the position reached and whether it is still
    inside (the window ended, possibly on a backslash whose escape is not read yet)."""
    while True:
        pos = _IN_STRING.match(text, pos).end()  # type: ignore[union-attr]
        if pos + 1 < len(text) and text[pos] == "\\":
            pos += 2
        elif pos < len(text) and text[pos] == '"':
            return pos + 1, False
        else:
            return pos, True


def _structure(text: str, pos: int, depth: int) -> tuple[int, int, bool]:
    """Step over the structural character at ``pos``: a run of openings or closings at once
    (deep nesting is such a run), or a quote. Returns depth, position and whether a string
    starts."""
    char = text[pos]
    if char in "[{":
        end = _OPENING.match(text, pos).end()  # type: ignore[union-attr]
        return depth + end - pos, end, False
    if char in "]}":
        end = _CLOSING.match(text, pos).end()  # type: ignore[union-attr]
        run = min(end - pos, depth)
        return depth - run, pos + run, False
    return depth, pos + 1, char == '"'


def _failure_row(walker: _ArrayWalker, item: Any, matcher: KeyMatcher, keep_raw: bool) -> RawRow:
    number = walker.row
    if isinstance(item, _Skipped):
        return RawRow(number, None, {RAW_VALUE_KEY: None}, item.message)
    if isinstance(item, dict):
        return RawRow(number, matcher.values(item, copy=keep_raw), item if keep_raw else None)
    return RawRow(
        number, None, {RAW_VALUE_KEY: item}, f"Row {number}: JSON element is not an object"
    )


def read_json(
    path: Path,
    *,
    columns: Sequence[str],
    keep_raw: bool,
    column_map: Mapping[str, str] | None = None,
) -> Generator[RawRow, None, None]:
    """Stream the elements of a JSON array file (see ``bulkops.formats.read_rows``)."""
    matcher = KeyMatcher(columns, column_map)
    with open_file(path) as fh:
        walker = _ArrayWalker(fh)
        for item in walker.elements():
            yield _failure_row(walker, item, matcher, keep_raw)


def count_json(path: Path) -> int:
    """Count the elements of the top-level array, checking the whole document parses."""
    with open_file(path) as fh:
        walker = _ArrayWalker(fh)
        return sum(1 for _ in walker.elements())
