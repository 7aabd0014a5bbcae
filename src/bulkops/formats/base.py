"""Shared pieces of the readers: formats, the row type, detection and column matching."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO, cast

from bulkops.errors import FileFormatError
from bulkops.formats.limits import Meter

# Keys used in ``RawRow.raw`` for content that has no column name of its own. They start
# with an underscore so they cannot be mistaken for a model column.
RAW_EXTRA_KEY = "_extra"  # CSV fields beyond the header
RAW_LINE_KEY = "_line"  # text of a record that could not be parsed at all
RAW_VALUE_KEY = "_value"  # a JSON element that is not an object

# Raw text kept for an unparsable record is capped: a runaway quote can swallow a lot.
MAX_RAW_TEXT = 2000

# The largest record (a CSV record, a JSON Lines line, a JSON array element) a reader holds.
# A larger one is skipped as a failed row, so one hostile upload cannot make a reader hold
# hundreds of megabytes.
MAX_RECORD_BYTES = 8 * 1024 * 1024

UTF8_BOM = b"\xef\xbb\xbf"


class FileFormat(StrEnum):
    """The file formats bulkops reads."""

    CSV = "csv"
    JSON = "json"
    JSONL = "jsonl"
    XLSX = "xlsx"


@dataclass(slots=True)
class RawRow:
    """One data row as read from a file, before validation.

    Attributes:
        number: 1-based data row number. The CSV header is not a row; blank lines are
            skipped and not counted.
        values: The row keyed by the model's column names (only matched columns), or None
            when ``error`` is set.
        raw: The record under the file's own column names. Built when the reader was asked
            to keep it, and always (best effort) for rows with an error.
        error: A human-readable parse problem of this row, e.g.
            ``"Row 7: JSON element is not an object"``.
    """

    number: int
    values: dict[str, Any] | None
    raw: dict[str, Any] | None
    error: str | None = None


_EXTENSIONS = {
    "csv": FileFormat.CSV,
    "json": FileFormat.JSON,
    "jsonl": FileFormat.JSONL,
    "ndjson": FileFormat.JSONL,
    "jsonlines": FileFormat.JSONL,
    "xlsx": FileFormat.XLSX,
}

XLSX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

_CONTENT_TYPES = {
    "text/csv": FileFormat.CSV,
    "application/csv": FileFormat.CSV,
    "text/comma-separated-values": FileFormat.CSV,
    "application/json": FileFormat.JSON,
    "text/json": FileFormat.JSON,
    "application/x-ndjson": FileFormat.JSONL,
    "application/ndjson": FileFormat.JSONL,
    "application/jsonl": FileFormat.JSONL,
    "application/x-jsonl": FileFormat.JSONL,
    "application/jsonlines": FileFormat.JSONL,
    "application/x-jsonlines": FileFormat.JSONL,
    "text/jsonl": FileFormat.JSONL,
    XLSX_MEDIA_TYPE: FileFormat.XLSX,
}

# Media types of a gzip-compressed upload: the format then comes from the file name.
_GZIP_TYPES = frozenset({"application/gzip", "application/x-gzip", "application/gzip-compressed"})
GZIP_MAGIC = b"\x1f\x8b"


def _base_name(file_name: str | None) -> str:
    # Browsers may send a full client path, with either separator.
    return (file_name or "").replace("\\", "/").rsplit("/", 1)[-1]


def _media(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_compressed(file_name: str | None, content_type: str | None) -> bool:
    """Whether an upload is gzip-compressed: its name ends with ``.gz`` (any case) or its
    content type is ``application/gzip``."""
    return _base_name(file_name).lower().endswith(".gz") or _media(content_type) in _GZIP_TYPES


def detect_format(file_name: str | None, content_type: str | None) -> FileFormat | None:
    """Guess the format of an upload.

    The file name's extension decides when it is known (``.csv``, ``.json``, ``.jsonl``,
    ``.ndjson``, ``.xlsx``, any case); otherwise the content type does (parameters such as
    ``charset`` are ignored, and any ``+json`` type counts as JSON). A compressed upload
    (see ``is_compressed``) is known by the name without its ``.gz`` alone.

    Args:
        file_name: The uploaded file name, possibly with a client-side path.
        content_type: The declared media type.

    Returns:
        The format, or None when neither hint names a supported one.
    """
    base = _base_name(file_name)
    compressed = is_compressed(file_name, content_type)
    if base.lower().endswith(".gz"):
        base = base[:-3]
    if "." in base:
        found = _EXTENSIONS.get(base.rsplit(".", 1)[1].lower())
        if found is not None:
            return found
    if compressed:
        return None
    media = _media(content_type)
    found = _CONTENT_TYPES.get(media)
    if found is not None:
        return found
    if media.endswith("+json"):
        return FileFormat.JSON
    return None


def corrupt_gzip_message(detail: object) -> str:
    """The message of a compressed file that cannot be decompressed."""
    return f"The file is not a valid gzip stream ({detail})"


class _Gunzip(gzip.GzipFile):
    """A gzip stream whose decompression faults are ``FileFormatError``s."""

    def read(self, size: int | None = -1) -> bytes:
        try:
            return super().read(size)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FileFormatError(corrupt_gzip_message(exc)) from None

    def read1(self, size: int = -1) -> bytes:
        try:
            return super().read1(size)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FileFormatError(corrupt_gzip_message(exc)) from None

    def readline(self, size: int | None = -1) -> bytes:
        try:
            return super().readline(size)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FileFormatError(corrupt_gzip_message(exc)) from None

    def peek(self, n: int) -> bytes:
        try:
            return super().peek(n)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FileFormatError(corrupt_gzip_message(exc)) from None

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return super().seek(offset, whence)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise FileFormatError(corrupt_gzip_message(exc)) from None


def open_file(path: Path) -> BinaryIO:
    """Open a stored file for reading, decompressed while it is read when it is gzip
    (known by its first bytes, so a file stored as uploaded needs no other mark).

    Offsets (``tell``, ``seek``) are then positions in the decompressed bytes; a seek
    forward decompresses what it passes, a seek back starts again from the top. A corrupt
    stream raises ``FileFormatError`` where it is met, and one that expands beyond the
    limits in force (``formats.limits``) ``ExpandedTooLarge``.
    """
    fh = path.open("rb")
    try:
        if fh.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
            fh.seek(0)
            return fh
    except BaseException:
        fh.close()
        raise
    fh.close()
    return cast(BinaryIO, Meter().metered(cast(BinaryIO, _Gunzip(path, "rb"))))


def _fold(name: str) -> str:
    # Case-insensitive matching also forgives stray spaces around a header name.
    return name.strip().casefold()


def match_columns(names: Sequence[str], columns: Iterable[str]) -> dict[str, int]:
    """Map model columns to positions in a list of file column names.

    A file name equal to the model column wins; otherwise the first file name equal to it
    case-insensitively (and not claimed exactly by another model column) is used.

    Args:
        names: The file's column names in file order.
        columns: The model's column names.

    Returns:
        ``{model column: index into names}`` for the model columns found.
    """
    wanted = list(dict.fromkeys(columns))
    exact: dict[str, int] = {}
    for index, name in enumerate(names):
        exact.setdefault(name, index)
    claimed = {exact[col] for col in wanted if col in exact}
    folded: dict[str, int] = {}
    for index, name in enumerate(names):
        if index not in claimed:
            folded.setdefault(_fold(name), index)
    found: dict[str, int] = {}
    for col in wanted:
        position = exact.get(col, folded.get(_fold(col)))
        if position is not None:
            found[col] = position
    return found


def renamed(names: Sequence[str], column_map: Mapping[str, str] | None) -> list[str]:
    """File column names after a column map (file column -> model column) is applied."""
    if not column_map:
        return list(names)
    return [column_map.get(name, name) for name in names]


def column_positions(
    header: Sequence[str],
    columns: Sequence[str],
    required: Sequence[str],
    column_map: Mapping[str, str] | None,
) -> list[tuple[str, int]]:
    """(model column, index into ``header``) of the model columns a header holds.

    Raises:
        FileFormatError: a required column is missing (naming every one missing).
    """
    found = match_columns(renamed(header, column_map), [*columns, *required])
    missing = [name for name in dict.fromkeys(required) if name not in found]
    if missing:
        raise FileFormatError(f"Missing required column(s): {', '.join(missing)}")
    return [(name, found[name]) for name in dict.fromkeys(columns) if name in found]


class KeyMatcher:
    """Re-keys JSON objects from the file's keys to the model's column names.

    Args:
        columns: the model's column names.
        column_map: file key -> model column, applied before matching.
    """

    __slots__ = ("_exact", "_folded", "_map")

    def __init__(self, columns: Sequence[str], column_map: Mapping[str, str] | None = None) -> None:
        self._exact = frozenset(columns)
        self._map = dict(column_map or {})
        self._folded: dict[str, str] = {}
        for col in columns:
            self._folded.setdefault(_fold(col), col)

    def values(self, obj: dict[str, Any], *, copy: bool) -> dict[str, Any]:
        """The matched model columns of ``obj`` (exact keys win over case-insensitive).

        Args:
            obj: A decoded JSON object.
            copy: Whether the result must not be ``obj`` itself (when ``obj`` is kept raw).
        """
        if self._map:
            obj = {self._map.get(key, key): value for key, value in obj.items()}
            copy = False
        if obj.keys() <= self._exact:
            # The common case: the producer used the model's names.
            return dict(obj) if copy else obj
        values: dict[str, Any] = {}
        inexact: list[tuple[str, Any]] = []
        for key, value in obj.items():
            if key in self._exact:
                values[key] = value
            else:
                col = self._folded.get(_fold(key))
                if col is not None:
                    inexact.append((col, value))
        for col, value in inexact:
            values.setdefault(col, value)
        return values


def clip(text: str) -> str:
    """Cap raw text kept for an unparsable record."""
    return text if len(text) <= MAX_RAW_TEXT else text[:MAX_RAW_TEXT] + "..."


def not_utf8_message(row: int) -> str:
    """The message of a file that fails to decode near a data row."""
    return f"File is not valid UTF-8 (near row {row})"


def too_large_message(row: int) -> str:
    """The message of a record larger than ``MAX_RECORD_BYTES``."""
    return f"Row {row}: record is larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB"


def too_deep_message(row: int) -> str:
    """The message of a JSON value nested deeper than the decoder allows."""
    return f"Row {row}: JSON is nested too deeply"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One decoder for both JSON formats: standard JSON only (no NaN or Infinity), floats for
# decimals, and a C scanner whose recursion guard bounds the work on absurd nesting.
decode_json = json.JSONDecoder(parse_constant=_reject_constant).raw_decode


def bounded_lines(fh: BinaryIO, limit: int = MAX_RECORD_BYTES) -> Iterator[bytes | None]:
    """The lines of a binary file, each at most ``limit`` bytes.

    A longer line is read past in chunks (never held whole) and yields None in its place, so
    a reader can report it as one failed row and go on with the next line.
    """
    while line := fh.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while (rest := fh.readline(limit)) and not rest.endswith(b"\n"):
            pass
        yield None


# How much ``decoded_blocks`` reads at a time: large enough that the per-block work is
# nothing beside the lines', small enough to keep a reader's memory flat.
LINE_BLOCK = 32 * 1024


def decoded_blocks(
    fh: BinaryIO,
    usable: Callable[[bytes, int], bool] = lambda _text, _cut: True,
    longest: int | None = None,
) -> Iterator[list[str]]:
    """The lines of a file from its current position, a block of whole lines at a time,
    decoded and split on LF in one call each (each line without its LF).

    Reading this way stops at the first block that is not valid UTF-8, is not ``usable``
    (given the bytes read and how many of them are whole lines) or holds a line longer
    than ``longest`` characters, and at a line longer than a block or a last line without
    LF. The file is then left where that block begins, for a reader that goes on line by
    line and can name the line at fault.
    """
    size, at, carry = LINE_BLOCK, fh.tell(), b""
    while True:
        block = fh.read(size)
        text = carry + block if carry else block
        cut = text.rfind(b"\n") + 1
        if not cut or not usable(text, cut):
            break
        try:
            lines = str(memoryview(text)[:cut], "utf-8").split("\n")
        except UnicodeDecodeError:
            break
        lines.pop()  # the empty string after the last LF
        if longest is not None and max(map(len, lines)) > longest:
            break
        yield lines
        at += cut
        carry = text[cut:]
    fh.seek(at)


SCAN_BLOCK = 1024 * 1024


def _line_blocks(fh: BinaryIO, block_size: int) -> Iterator[bytes | None]:
    """Blocks of whole lines, each ending with LF (one is added to a last line without
    it); None in place of a line longer than a record may be, and nothing after it."""
    carry = b""
    while block := fh.read(block_size):
        text = carry + block if carry else block
        cut = text.rfind(b"\n") + 1
        carry = text[cut:]
        if len(carry) > MAX_RECORD_BYTES:
            yield None
            return
        if cut:
            yield text[:cut]
    if carry:
        yield carry + b"\n"


def scan_lines(
    fh: BinaryIO,
    chunk_rows: int,
    *,
    blank: bytes,
    usable: Callable[[bytes], bool] = lambda _: True,
    block_size: int = SCAN_BLOCK,
) -> tuple[int, list[tuple[int, int]]] | None:
    """Count the rows of a file whose rows are its lines, from the current position, and
    with ``chunk_rows`` find the byte offsets where rows 1, 1 + chunk_rows, ... begin.

    A line is a row unless only ``blank`` bytes remain once they are stripped from both
    ends. The file is read in blocks, split on LF in C, never record by record in Python.
    Returns None, having decided nothing, when a block of whole lines is
    not ``usable``, is not valid UTF-8, or a line is longer than a record may be: the
    caller then counts with its parser, which also names the row at fault.
    """
    offset = fh.tell()
    count = 0
    starts: list[tuple[int, int]] = []
    first = 1 % chunk_rows if chunk_rows else -1
    above_blank = max(blank, default=-1)
    for lines in _line_blocks(fh, block_size):
        if lines is None or not usable(lines) or not _utf8(lines):
            return None
        split = lines.split(b"\n")
        split.pop()  # the empty bytes after the last LF
        if max(map(len, split)) >= MAX_RECORD_BYTES:
            return None
        lowest = min(split)
        if lowest and lowest[0] > above_blank:
            # No line is empty or begins with a blank byte, so every line is a row: the
            # rows that begin chunks, and where, from the lines' running lengths (in C).
            if chunk_rows:
                before = [0, *accumulate(map(len, split))]  # line i begins before[i] + i in
                for i in range((first - count - 1) % chunk_rows, len(split), chunk_rows):
                    starts.append((count + i + 1, offset + before[i] + i))
            count += len(split)
            offset += len(lines)
            continue
        for line in split:
            if line.strip(blank):
                count += 1
                if chunk_rows and count % chunk_rows == first:
                    starts.append((count, offset))
            offset += len(line) + 1
    return count, starts


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
