"""Decompression bombs for the tests of the expanded-size limit: small files that expand
far beyond it, written without ever holding the expansion."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

from openpyxl import Workbook

BLOCK_ROWS = 10_000
_MAIN = b'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
_TEXT = '<c t="inlineStr"><is><t>{}</t></is></c>'
_STRINGS_TYPE = (
    b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
    b'officedocument.spreadsheetml.sharedStrings+xml" />'
)


def gzip_csv_bomb(path: Path, rows: int) -> Path:
    """A ``.csv.gz`` of the ``record`` operation's columns with ``rows`` identical rows."""
    block = b"bob,bob@example.com,30\n" * BLOCK_ROWS
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b"name,email,age\n")
        for _ in range(rows // BLOCK_ROWS):
            out.write(block)
    return path


def xlsx_bomb(path: Path, rows: int, *, part: str = "sheet") -> Path:
    """A workbook of the ``record`` operation's columns whose worksheet XML (``sheet``:
    ``rows`` identical rows) or shared strings (``strings``: ``rows`` identical strings,
    the sheet holding two rows) expands a thousandfold."""
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["name", "email", "age"])
    sheet.append(["seed", "seed@example.com", 1])
    plain = io.BytesIO()
    book.save(plain)
    if part == "sheet":
        name = "xl/worksheets/sheet1.xml"
        header = "".join(_TEXT.format(text) for text in ("name", "email", "age"))
        row = _TEXT.format("bob") + _TEXT.format("bob@example.com") + "<c><v>30</v></c>"
        head = b"<worksheet " + _MAIN + b"><sheetData><row>" + header.encode() + b"</row>"
        block, tail = f"<row>{row}</row>".encode(), b"</sheetData></worksheet>"
    else:
        name = "xl/sharedStrings.xml"
        head = b"<sst " + _MAIN + b"><si><t>name</t></si><si><t>email</t></si><si><t>seed</t>"
        head += b"</si><si><t>seed@example.com</t></si>"
        block, tail = b"<si><t>filler</t></si>", b"</sst>"
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(path, "w") as out:
        for info in source.infolist():
            content = source.read(info.filename)
            if info.filename == "[Content_Types].xml" and part != "sheet":
                content = content.replace(b"</Types>", _STRINGS_TYPE + b"</Types>")
            if info.filename != name:
                out.writestr(info, content)
        member = zipfile.ZipInfo(name)
        member.compress_type = zipfile.ZIP_DEFLATED
        with out.open(member, "w", force_zip64=True) as xml:
            xml.write(b'<?xml version="1.0" encoding="UTF-8"?>' + head)
            for _ in range(rows // BLOCK_ROWS):
                xml.write(block * BLOCK_ROWS)
            xml.write(tail)
    return path
