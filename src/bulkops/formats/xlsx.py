"""Streaming reader of XLSX workbooks: one worksheet, its first non-empty row the header.

openpyxl's reader (read-only mode) reads the workbook's parts: the sheet list, the styles
and which of them are dates, the date epoch; it also converts date serials. The shared
strings and the worksheet's rows are read here: the rows a block of XML at a time, so
memory stays flat in rows. A block whose XML is plain (cells as Excel, LibreOffice and
openpyxl write them) is read with regular expressions, cell by cell; any other block is
parsed by the C parser into a tree, then dropped. Both give the same cells. What a
workbook stores once is held whole: its shared strings table (each distinct text, as
Excel saves them) and the XML before the sheet's rows. The table of the workbook read
last stays for the next reader of the same file in the process (the next chunk of an
operation).

Cells come out as a CSV cell would read: text, whole numbers as integers (``3.0`` is
``"3"``), other numbers in decimal notation, booleans ``true``/``false``, dates and times
in ISO 8601 (a date-time at midnight as a date). Empty cells are absent and rows without
any value are skipped (neither counted nor numbered). Cells under no header name are
ignored.

Rows are counted, and split into chunks, by a scan of the worksheet's XML that finds each
row element and whether it holds a value, without parsing cells: a tenth of the cost of
reading them. A chunk is read by decompressing up to its first row's offset in the XML
and parsing from there.
"""

from __future__ import annotations

import os
import re
import warnings
import zipfile
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import IO, Any
from xml.etree.ElementTree import XML, Element, ParseError, iterparse

from openpyxl.reader.excel import ExcelReader
from openpyxl.styles.stylesheet import apply_stylesheet
from openpyxl.utils.datetime import from_excel, from_ISO8601
from openpyxl.xml.constants import SHARED_STRINGS, SHEET_MAIN_NS

from bulkops.errors import FileFormatError
from bulkops.formats.base import GZIP_MAGIC, RawRow, column_positions
from bulkops.formats.limits import Meter

__all__ = [
    "UnknownSheet",
    "cell_text",
    "check_sheet",
    "chunk_xlsx",
    "count_xlsx",
    "read_xlsx",
    "read_xlsx_header",
    "sheet_names",
]

_ROW_TAG = f"{{{SHEET_MAIN_NS}}}row"
_VALUE_TAG = f"{{{SHEET_MAIN_NS}}}v"
_INLINE_TAG = f"{{{SHEET_MAIN_NS}}}is"
_TEXT_TAG = f"{{{SHEET_MAIN_NS}}}t"
_RUN_TAG = f"{{{SHEET_MAIN_NS}}}r"
_STRING_TAG = f"{{{SHEET_MAIN_NS}}}si"

# The shared strings table is held whole; a larger one is refused rather than read (a
# zip member can inflate a thousandfold, and its size is declared in the directory).
MAX_SHARED_STRINGS_BYTES = 512 * 1024 * 1024
# The XML before the rows of a sheet (sheet properties, views, column widths).
_MAX_HEAD_BYTES = 16 * 1024 * 1024
# Rows are parsed a block of XML at a time (about 1,800 rows of five cells).
_SCAN_BLOCK = 256 * 1024
_DATE_TEXTS = 65536  # date texts kept for reuse, at most

_NAME = rb"<(?:[A-Za-z_][\w.\-]*:)?"  # an element's start, with any namespace prefix
_DATA_START = re.compile(_NAME + rb"sheetData\b[^>]*?(/?)>")
_DATA_END = re.compile(rb"</(?:[A-Za-z_][\w.\-]*:)?sheetData\s*>")
_ROW_START = re.compile(_NAME + rb"row\b")
# A row has a value when a cell has a value with text (CDATA included) or an inline
# string: exactly the cells openpyxl reads as something other than None.
_HAS_VALUE = re.compile(_NAME + rb"(?:v\b[^>]*(?<!/)>(?:[^<]|<!\[CDATA\[[^\]])|is\b)")


# --- plain XML, read without a parser (see ``_Sheet._plain_rows``)

_NOT_PLAIN = re.compile(
    rb"<[A-Za-z_][\w.\-]*:|</[A-Za-z_][\w.\-]*:|<!|<\?|<r[\s>]|<rPh|='|\r"
    rb"|&(?!(?:lt|gt|amp|quot|apos|#[0-9]+|#x[0-9A-Fa-f]+);)"
)
_ROW_OPEN = re.compile(rb"<row\b[^>]*?(/?)>")
_SPACE = re.compile(rb"\s*")
# A cell as Excel, LibreOffice and openpyxl write them: reference, style and type in this
# order (the style before or after the type), then a value (after any formula), an
# inline string, or nothing. Groups: column letters, style, type, style, value, text.
_PLAIN_CELL = re.compile(
    rb'<c r="([A-Z]{1,3})[0-9]+"(?: s="([0-9]+)")?(?: t="([A-Za-z]+)")?(?: s="([0-9]+)")?'
    rb"\s*(?:/>|>(?:<f\b[^>]*(?:/>|>[^<]*</f>))?"
    rb'(?:<v>([^<]*)</v>|<v\s*/>|<is><t(?: xml:space="preserve")?>([^<]*)</t></is>'
    rb"|<is><t\s*/></is>)?</c>)"
)
_ENTITY = re.compile("&(lt|gt|amp|quot|apos|#[0-9]+|#x[0-9A-Fa-f]+);")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _entity(found: re.Match[str]) -> str:
    name = found.group(1)
    if name[0] != "#":
        return _ENTITIES[name]
    return chr(int(name[2:], 16) if name[1] == "x" else int(name[1:]))


def _unescape(raw: bytes) -> str:
    text = raw.decode()
    return _ENTITY.sub(_entity, text) if "&" in text else text


class _NotPlain(Exception):
    """The XML of a block is not plain enough to read without a parser."""


class UnknownSheet(FileFormatError):
    """The sheet asked for is not in the workbook."""

    def __init__(self, sheet: str, names: Sequence[str]) -> None:
        listed = ", ".join(repr(name) for name in names) or "none"
        super().__init__(f"Unknown sheet {sheet!r}: the workbook's sheets are {listed}")
        self.sheet = sheet
        self.names = list(names)


def _broken(detail: object) -> FileFormatError:
    return FileFormatError(f"The file is not a readable XLSX workbook ({detail})")


# The shared strings of the workbook read last in this process: the chunks of one
# operation read the same workbook one after the other, and each would parse the whole
# table again (a quarter of a second for 200,000 distinct texts).
_last_strings: tuple[tuple[str, int, int], list[str]] | None = None


def _shared_strings(reader: Any, key: tuple[str, int, int], meter: Meter) -> list[str]:
    """The workbook's shared strings table (each ``si`` element's text, as openpyxl reads
    it), its parse tree dropped as it goes; ``key`` names the file (path, size, mtime).
    The table's XML counts toward the workbook's expanded bytes (``meter``)."""
    global _last_strings
    last = _last_strings
    if last is not None and last[0] == key and not meter.limit:
        return last[1]
    part = reader.package.find(SHARED_STRINGS)
    if part is None:
        return []
    strings: list[str] = []
    root: Element | None = None
    with meter.metered(reader.archive.open(part.PartName[1:])) as source:
        for event, node in iterparse(source, events=("start", "end")):
            if root is None:
                root = node
            elif event == "end" and node.tag == _STRING_TAG:
                strings.append(_inline(node).replace("x005F_", ""))
                root.clear()
    _last_strings = (key, strings)
    return strings


class _Book:
    """An open workbook: its worksheets, shared strings and date styles (read by
    openpyxl's reader in read-only mode; the worksheets themselves are read here)."""

    def __init__(self, fh: IO[bytes], key: tuple[str, int, int]) -> None:
        reader = ExcelReader(fh, read_only=True, data_only=True, keep_links=False)
        reader.read_manifest()
        reader.read_workbook()
        apply_stylesheet(reader.archive, reader.wb)
        self.archive: zipfile.ZipFile = reader.archive
        # The worksheet and shared strings as decompressed, against the limits in force.
        self.meter = Meter()
        self.strings = _shared_strings(reader, key, self.meter)
        self.epoch: datetime = reader.wb.epoch
        self.date_styles: frozenset[int] = frozenset(reader.wb._date_formats)
        self.duration_styles: frozenset[int] = frozenset(reader.wb._timedelta_formats)
        present = set(reader.valid_files)
        self.sheets: dict[str, str] = {}  # worksheet name -> its part in the archive
        for sheet, rel in reader.parser.find_sheets():
            if rel.target in present and "chartsheet" not in rel.Type:
                self.sheets.setdefault(sheet.name, rel.target)

    def choose(self, sheet: str | None) -> str:
        """The name of the worksheet ``sheet`` names (exactly, else case-insensitively),
        or of the first one."""
        names = list(self.sheets)
        if sheet is None:
            if not names:
                raise FileFormatError("The workbook has no worksheet")
            return names[0]
        if sheet in self.sheets:
            return sheet
        folded = sheet.strip().casefold()
        for name in names:
            if name.casefold() == folded:
                return name
        raise UnknownSheet(sheet, names)


@contextmanager
def _workbook(path: Path) -> Iterator[_Book]:
    """The workbook, open; a file that is not one is a ``FileFormatError``."""
    with path.open("rb") as fh:
        stat = os.fstat(fh.fileno())
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if fh.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
            raise _broken("it is gzip-compressed: upload the .xlsx file itself")
        fh.seek(0)
        try:
            with zipfile.ZipFile(fh) as archive:
                for info in archive.infolist():
                    if info.filename.endswith("sharedStrings.xml") and (
                        info.file_size > MAX_SHARED_STRINGS_BYTES
                    ):
                        raise _broken("its shared strings are too large to read")
            fh.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # openpyxl warns of features it drops
                book = _Book(fh, key)
        except FileFormatError:
            raise
        except zipfile.BadZipFile:
            raise _broken("not a zip archive") from None
        except Exception as exc:  # openpyxl raises whatever its parts' readers meet
            raise _broken(exc) from None
        try:
            yield book
        finally:
            book.archive.close()


def sheet_names(path: Path) -> list[str]:
    """The worksheet names of a workbook, in workbook order.

    Raises:
        FileFormatError: The file is not a readable workbook.
    """
    with _workbook(path) as book:
        return list(book.sheets)


def check_sheet(path: Path, sheet: str | None) -> str:
    """The name of the worksheet ``sheet`` names (exactly, else case-insensitively), or of
    the first one.

    Raises:
        UnknownSheet: No worksheet has that name.
        FileFormatError: The file is not a readable workbook, or has no worksheet.
    """
    with _workbook(path) as book:
        return book.choose(sheet)


# --- cell values ------------------------------------------------------------------------


def _number(value: float) -> str:
    if value.is_integer():
        return str(int(value))
    text = repr(value)
    return text if "e" not in text else format(Decimal(text), "f")


def _duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    sign = "-" if seconds < 0 else ""
    return f"{sign}PT{_number(abs(seconds))}S"


def cell_text(value: Any) -> str | None:
    """A cell value as a CSV cell would read (None for an empty cell)."""
    if value is None or isinstance(value, str):
        return value
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is float:
        return _number(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is datetime:
        if value.hour == value.minute == value.second == value.microsecond == 0:
            return str(value.date().isoformat())
        return str(value.isoformat())
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return _duration(value)
    return str(value)


# --- the rows ---------------------------------------------------------------------------


_ROOT_TAG = re.compile(rb"<([A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)\b[^>]*>")


def _head(stream: IO[bytes]) -> tuple[bytes, bool]:
    """The worksheet's XML up to the end of its ``sheetData`` start tag, and whether the
    sheet has rows at all (False for ``<sheetData/>``, or no sheet data)."""
    text = b""
    while len(text) <= _MAX_HEAD_BYTES:
        block = stream.read(_SCAN_BLOCK)
        if not block:
            return text, False
        text += block
        found = _DATA_START.search(text)
        if found is not None:
            return text[: found.end()], not found.group(1)
    raise _broken("the worksheet's rows do not begin within 16 MiB")


Blocks = Generator[tuple[int, bytes, list[int], list[bool]], None, None]


def _blocks(stream: IO[bytes], offset: int) -> Blocks:
    """The row elements of a worksheet's XML from byte ``offset``, a block at a time:
    (offset of ``text[0]``, text, bounds, kept) where row i is ``text[bounds[i]:bounds[i
    + 1]]`` and ``kept[i]`` says whether it holds a value.

    Rows are found by their start tags and judged by ``_HAS_VALUE``, never parsed: the
    count, the chunk offsets and the reader all see the same rows this way.
    """
    has_value = _HAS_VALUE.search
    base, text = offset, b""
    while True:
        block = stream.read(_SCAN_BLOCK)
        text = text + block if text else block
        end = _DATA_END.search(text)
        final = end is not None or not block
        limit = end.start() if end is not None else len(text)
        bounds = [match.start() for match in _ROW_START.finditer(text, 0, limit)]
        if final:
            bounds.append(limit)
        if len(bounds) > 1:
            kept = [has_value(text, at, until) is not None for at, until in pairwise(bounds)]
            yield base, text, bounds, kept
        if final:
            return
        # Keep the last row, which may not be whole yet (or, when no row began here, a
        # tail that may hold the start of a tag cut in two).
        cut = bounds[-1] if bounds else max(0, len(text) - 64)
        base += cut
        text = text[cut:]


_COLUMNS: dict[str, int] = {}


def _column(reference: str) -> int:
    """The 1-based column number of a cell reference such as ``AB12``."""
    letters = reference.rstrip("0123456789")
    number = _COLUMNS.get(letters)
    if number is None:
        number = 0
        for letter in letters.upper():
            number = number * 26 + ord(letter) - 64
        if not 0 < number <= 16384 or not letters.isalpha():
            raise ValueError(f"bad cell reference {reference!r}")
        _COLUMNS[letters] = number  # at most Excel's 16,384 columns
    return number


def _inline(holder: Element) -> str:
    """The text of an inline string: its ``t``, or the ``t`` of each of its runs."""
    if len(holder) == 1 and holder[0].tag == _TEXT_TAG:
        return holder[0].text or ""
    parts = []
    for child in holder:
        if child.tag == _TEXT_TAG:
            parts.append(child.text or "")
        elif child.tag == _RUN_TAG:
            parts.append(child.findtext(_TEXT_TAG) or "")
    return "".join(parts)


class _Sheet:
    """One worksheet of an open workbook: its rows as ``{column number: text}``."""

    def __init__(self, book: _Book, part: str) -> None:
        self._book = book
        self._part = part
        # Texts of date cells by (serial, style): a column of dates repeats its days.
        self._dates: dict[tuple[str, str], str] = {}

    def open(self) -> IO[bytes]:
        """The worksheet's XML, decompressed as it is read (and metered)."""
        return self._book.meter.metered(self._book.archive.open(self._part))

    def blocks(self, offset: int = -1) -> tuple[bytes, Blocks]:
        """The worksheet's root start tag, and its row blocks (see ``_blocks``) from the
        first row or from the row at byte ``offset`` of the XML. Close the blocks."""
        stream = self.open()
        try:
            head, has_rows = _head(stream)
            root = _ROOT_TAG.search(head)
            if root is None:
                raise _broken("the worksheet has no root element")
            stream.seek(offset if offset >= 0 else len(head))
        except BaseException:
            stream.close()
            raise
        return root.group(0), self._closing(stream, has_rows, max(offset, len(head)))

    @staticmethod
    def _closing(stream: IO[bytes], has_rows: bool, offset: int) -> Blocks:
        with stream:
            if has_rows:
                yield from _blocks(stream, offset)

    def rows(self, offset: int = -1) -> Generator[dict[int, str], None, None]:
        """The rows that hold a value, from the start or from the row element at byte
        ``offset`` of the XML (a row whose values are all empty text has no cells)."""
        try:
            opening, blocks = self.blocks(offset)
            with closing(blocks):
                name = _ROOT_TAG.match(opening)
                closing_tag = b"</" + (name.group(1) if name else b"worksheet") + b">"
                for _, text, bounds, kept in blocks:
                    if not any(kept):
                        continue
                    plain = self._plain_rows(text, bounds, kept)
                    if plain is not None:
                        yield from plain
                        continue
                    root = XML(opening + text[bounds[0] : bounds[-1]] + closing_tag)
                    if len(root) != len(kept):
                        raise _broken("unexpected elements among the worksheet's rows")
                    for row, keep in zip(root, kept, strict=True):
                        if row.tag != _ROW_TAG:  # e.g. Strict Open XML's namespace
                            raise _broken(f"unexpected element {row.tag} among the rows")
                        if keep:
                            yield self._cells(row)
        except ParseError as exc:
            raise _broken(f"invalid worksheet XML: {exc}") from None
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise _broken(exc) from None
        except (ValueError, KeyError, IndexError, OverflowError) as exc:
            raise _broken(f"invalid cell: {exc}") from None

    def _plain_rows(
        self, text: bytes, bounds: list[int], kept: list[bool]
    ) -> list[dict[int, str]] | None:
        """The rows of a block read without building a tree, when its XML is plain: no
        namespace prefix, comment, CDATA, processing instruction, rich text, single-quoted
        attribute, CR or entity beyond XML's five and character references, and every
        row exactly a row tag, cells and an end tag. None when it is not (the block is
        then parsed): the two readings give the same rows, and this one costs half.
        """
        block = text[bounds[0] : bounds[-1]]
        if _NOT_PLAIN.search(block) is not None:
            return None
        found = []
        try:
            for at, until, keep in zip(bounds, bounds[1:], kept, strict=False):
                cells = self._plain_cells(text, at, until)
                if keep:
                    found.append(cells)
        except _NotPlain:
            return None
        return found

    def _plain_cells(self, text: bytes, at: int, until: int) -> dict[int, str]:
        """The cells of the row ``text[at:until]``, when each is in one of the forms Excel,
        LibreOffice and openpyxl write (``_PLAIN_CELL``); else ``_NotPlain``."""
        opening = _ROW_OPEN.match(text, at, until)
        if opening is None:
            raise _NotPlain
        start = opening.end()
        if opening.group(1):  # <row .../>
            if _SPACE.fullmatch(text, start, until) is None:
                raise _NotPlain
            return {}
        end = text.rfind(b"</row>", start, until)
        found = _PLAIN_CELL.findall(text, start, end)
        if end < 0 or len(found) != text.count(b"<c", start, end):
            raise _NotPlain
        cells: dict[int, str] = {}
        columns = _COLUMNS
        for letters, style, kind, style_after, raw, inline in found:
            column = columns.get(key := letters.decode()) or _column(key)
            if inline:
                cells[column] = _unescape(inline)
            elif raw:
                cells[column] = self._plain_value(kind, style or style_after, _unescape(raw))
        return cells

    def _plain_value(self, kind: bytes, style: bytes, raw: str) -> str:
        """The text of a cell's value (as ``_cells`` reads it)."""
        if not kind or kind == b"n":
            return self._number(raw, style.decode() if style else None)
        if kind == b"s":
            return self._book.strings[int(raw)]
        if kind == b"b":
            return "true" if int(raw) else "false"
        if kind == b"d":
            return cell_text(from_ISO8601(raw)) or ""
        return raw  # "str" (a formula's text), "e" (an error such as #N/A), "inlineStr"

    def _number(self, raw: str, style: str | None) -> str:
        book = self._book
        if style is not None and (index := int(style)) in book.date_styles:
            text = self._dates.get((raw, style))
            if text is None:
                value = float(raw)
                moment = from_excel(value, book.epoch, timedelta=index in book.duration_styles)
                text = cell_text(moment) or ""
                if len(self._dates) >= _DATE_TEXTS:
                    self._dates.clear()
                self._dates[raw, style] = text
            return text
        if "." in raw or "E" in raw or "e" in raw:
            return _number(float(raw))
        return str(int(raw))

    def _cells(self, row: Element) -> dict[int, str]:
        cells: dict[int, str] = {}
        column = 0
        for cell in row:
            reference = cell.get("r")
            column = _column(reference) if reference else column + 1
            kind = cell.get("t", "n")
            if kind == "inlineStr" and (holder := cell.find(_INLINE_TAG)) is not None:
                cells[column] = _inline(holder)
                continue
            raw = cell.findtext(_VALUE_TAG)
            if not raw:
                continue
            if kind == "n":
                cells[column] = self._number(raw, cell.get("s"))
            elif kind == "s":
                cells[column] = self._book.strings[int(raw)]
            elif kind == "b":
                cells[column] = "true" if int(raw) else "false"
            elif kind == "d":
                cells[column] = cell_text(from_ISO8601(raw)) or ""
            else:  # "str" (a formula's text), "e" (an error such as #N/A), "inlineStr"
                cells[column] = raw
        return cells


@contextmanager
def _sheet(path: Path, sheet: str | None) -> Iterator[_Sheet]:
    with _workbook(path) as book:
        yield _Sheet(book, book.sheets[book.choose(sheet)])


def _header(rows: Iterator[dict[int, str]]) -> list[str]:
    first = next(rows, None)
    if first is None:
        raise FileFormatError("The sheet is empty: its first non-empty row is the header")
    width = max(first)
    return [first.get(column, "") for column in range(1, width + 1)]


def read_xlsx_header(path: Path, sheet: str | None = None) -> list[str]:
    """The header of a worksheet: the text of its first non-empty row (cells before its
    last non-empty one that are empty are empty names).

    Raises:
        FileFormatError: The file is not a readable workbook, or the sheet is empty.
        UnknownSheet: No worksheet is named ``sheet``.
    """
    with _sheet(path, sheet) as ws:
        rows = ws.rows()
        try:
            return _header(rows)
        finally:
            rows.close()


def read_xlsx(
    path: Path,
    *,
    columns: Sequence[str],
    required: Sequence[str],
    keep_raw: bool,
    column_map: Mapping[str, str] | None = None,
    sheet: str | None = None,
    start: tuple[int, int] | None = None,
) -> Generator[RawRow, None, None]:
    """Stream the data rows of a worksheet (see ``bulkops.formats.read_rows``); with
    ``start`` (row number, XML offset from ``chunk_xlsx``), from that row on."""
    with _sheet(path, sheet) as ws:
        rows = ws.rows()
        try:
            header = _header(rows)
            pairs = [
                (name, index + 1)  # cell columns count from 1
                for name, index in column_positions(header, columns, required, column_map)
            ]
            named = [(name, column) for column, name in enumerate(header, 1) if name]
            number = 0
            if start is not None and start[1] >= 0:
                rows.close()
                number, rows = start[0] - 1, ws.rows(start[1])
            for cells in rows:
                number += 1
                values = {name: text for name, column in pairs if (text := cells.get(column))}
                raw = None
                if keep_raw:
                    raw = {name: text for name, column in named if (text := cells.get(column))}
                yield RawRow(number, values, raw)
        finally:
            rows.close()


# --- counting ---------------------------------------------------------------------------


def count_xlsx(path: Path, sheet: str | None = None) -> int:
    """Count the data rows of a worksheet as ``read_xlsx`` numbers them."""
    return chunk_xlsx(path, 0, sheet)[0]


def chunk_xlsx(
    path: Path, chunk_rows: int, sheet: str | None = None
) -> tuple[int, list[tuple[int, int]]]:
    """Count the data rows as ``read_xlsx`` numbers them and, with ``chunk_rows``, find
    where rows 1, 1 + chunk_rows, ... begin: (row number, byte offset of the row element
    in the worksheet's decompressed XML).

    Raises:
        FileFormatError: The file is not a readable workbook, or the sheet is empty.
        UnknownSheet: No worksheet is named ``sheet``.
    """
    count = -1  # the header is row 0
    starts: list[tuple[int, int]] = []
    first = 1 % chunk_rows if chunk_rows else -1
    with _sheet(path, sheet) as ws:
        try:
            _, blocks = ws.blocks()
            with closing(blocks):
                for base, _, bounds, kept in blocks:
                    for at, keep in zip(bounds, kept, strict=False):
                        if keep:
                            count += 1
                            if chunk_rows and count > 0 and count % chunk_rows == first:
                                starts.append((count, base + at))
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise _broken(exc) from None
    if count < 0:
        raise FileFormatError("The sheet is empty: its first non-empty row is the header")
    return count, starts
