"""Writing an XLSX workbook of one worksheet as a stream: rows go in, zip bytes come out.

The worksheet is one deflated zip member written as the rows arrive, strings inline (no
shared strings table to hold), so a workbook of any size is written in flat memory and
its bytes can be sent while later rows are still being read. The zip is written without
seeking (sizes in data descriptors, Zip64 for the worksheet), as Excel, LibreOffice and
openpyxl read it.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

# Excel's limit on the text of one cell; longer text is cut there.
MAX_CELL_CHARS = 32767
# XML 1.0 has no way to write these characters: they are left out.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_FLUSH_ROWS = 200

_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_PACKAGE_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_DOCUMENT_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml"

_CONTENT_TYPES = (
    f'{_XML}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" '
    'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    f'<Override PartName="/xl/workbook.xml" ContentType="{_TYPE}.sheet.main+xml"/>'
    f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{_TYPE}.worksheet+xml"/>'
    f'<Override PartName="/xl/styles.xml" ContentType="{_TYPE}.styles+xml"/>'
    "</Types>"
)
_ROOT_RELS = (
    f'{_XML}<Relationships xmlns="{_PACKAGE_RELS}">'
    f'<Relationship Id="rId1" Type="{_DOCUMENT_RELS}/officeDocument" Target="xl/workbook.xml"/>'
    "</Relationships>"
)
_WORKBOOK = (
    f'{_XML}<workbook xmlns="{_MAIN}" xmlns:r="{_DOCUMENT_RELS}">'
    '<sheets><sheet name={name} sheetId="1" r:id="rId1"/></sheets></workbook>'
)
_WORKBOOK_RELS = (
    f'{_XML}<Relationships xmlns="{_PACKAGE_RELS}">'
    f'<Relationship Id="rId1" Type="{_DOCUMENT_RELS}/worksheet" Target="worksheets/sheet1.xml"/>'
    f'<Relationship Id="rId2" Type="{_DOCUMENT_RELS}/styles" Target="styles.xml"/>'
    "</Relationships>"
)
_STYLES = (
    f'{_XML}<styleSheet xmlns="{_MAIN}">'
    '<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>'
    '<fills count="2"><fill><patternFill patternType="none"/></fill>'
    '<fill><patternFill patternType="gray125"/></fill></fills>'
    '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
    '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
    '<cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs>'
    '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
    "</styleSheet>"
)  # fmt: skip
_SHEET_HEAD = f'{_XML}<worksheet xmlns="{_MAIN}"><sheetData>'
_SHEET_TAIL = "</sheetData></worksheet>"


class _Sink:
    """A write-only, unseekable file that keeps what is written until ``take``."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes, /) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def column_letters(number: int) -> str:
    """The letters of a 1-based column number (1 -> ``A``, 28 -> ``AB``)."""
    letters = ""
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _text(value: str) -> str:
    if len(value) > MAX_CELL_CHARS:
        value = value[:MAX_CELL_CHARS]
    return escape(_NOT_XML.sub("", value))


def _cell(reference: str, value: Any) -> str:
    kind = type(value)
    if kind is bool:
        return f'<c r="{reference}" t="b"><v>{int(value)}</v></c>'
    if kind is int or (kind is float and math.isfinite(value)):
        return f'<c r="{reference}"><v>{value!r}</v></c>'
    if kind is not str:
        value = json.dumps(value, ensure_ascii=False) if kind in (dict, list) else str(value)
    return (
        f'<c r="{reference}" t="inlineStr"><is><t xml:space="preserve">{_text(value)}</t></is></c>'
    )


class WorkbookStream:
    """An XLSX file of one worksheet, written a row at a time.

    ``row`` adds a row (None cells are left empty; numbers and booleans are typed cells,
    anything else text, objects and arrays as JSON), ``take`` returns the bytes produced
    so far, ``finish`` ends the file (``take`` then returns its last bytes).
    """

    def __init__(self, sheet_name: str = "Sheet1") -> None:
        self._sink = _Sink()
        self._zip = zipfile.ZipFile(self._sink, "w", compression=zipfile.ZIP_DEFLATED)
        self._zip.writestr("[Content_Types].xml", _CONTENT_TYPES)
        self._zip.writestr("_rels/.rels", _ROOT_RELS)
        self._zip.writestr("xl/workbook.xml", _WORKBOOK.format(name=quoteattr(sheet_name)))
        self._zip.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        self._zip.writestr("xl/styles.xml", _STYLES)
        self._sheet = self._zip.open("xl/worksheets/sheet1.xml", "w", force_zip64=True)
        self._parts: list[str] = [_SHEET_HEAD]
        self._rows = 0
        self._letters: list[str] = []

    def row(self, values: Sequence[Any]) -> None:
        """Add the next row."""
        self._rows += 1
        number = self._rows
        letters = self._letters
        while len(letters) < len(values):
            letters.append(column_letters(len(letters) + 1))
        cells = "".join(
            _cell(f"{letters[i]}{number}", value)
            for i, value in enumerate(values)
            if value is not None and value != ""
        )
        self._parts.append(f'<row r="{number}">{cells}</row>')
        if len(self._parts) >= _FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._parts:
            self._sheet.write("".join(self._parts).encode())
            self._parts.clear()

    def finish(self) -> None:
        """End the worksheet and the zip."""
        self._parts.append(_SHEET_TAIL)
        self._flush()
        self._sheet.close()
        self._zip.close()

    def take(self) -> bytes:
        """The bytes written since the last ``take`` (rows still buffered stay)."""
        return self._sink.take()


def header_workbook(columns: Sequence[str], sheet_name: str = "Sheet1") -> bytes:
    """A whole XLSX file whose one row is ``columns``."""
    book = WorkbookStream(sheet_name)
    book.row(list(columns))
    book.finish()
    return book.take()
