"""Unit tests of the XLSX reader and writer and of gzip-compressed files in bulkops.formats."""

from __future__ import annotations

import gzip
import io
import tracemalloc
import zipfile
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from openpyxl import Workbook, load_workbook

from bulkops.errors import FileFormatError
from bulkops.formats import (
    ChunkStart,
    FileFormat,
    RawRow,
    count_chunks,
    count_rows,
    detect_format,
    read_header,
    read_rows,
    xlsx,
)
from bulkops.formats.base import is_compressed
from bulkops.formats.workbook import WorkbookStream, header_workbook
from bulkops.formats.xlsx import UnknownSheet, cell_text, check_sheet, sheet_names

COLUMNS = ["name", "email", "age"]
MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def book_file(
    tmp_path: Path, *sheets: tuple[str, list[list[Any]]], write_only: bool = False
) -> Path:
    """A workbook written by openpyxl (shared strings; inline strings when write-only)."""
    book = Workbook(write_only=write_only)
    if not write_only:
        book.remove(book.active)
    for name, rows in sheets:
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    path = tmp_path / "book.xlsx"
    book.save(path)
    return path


def sheet_file(tmp_path: Path, sheet_xml: str, strings: list[str] | None = None) -> Path:
    """A workbook whose one worksheet is ``sheet_xml``, as another program might write it."""
    source = io.BytesIO(header_workbook(["x"]))
    path = tmp_path / "hand.xlsx"
    with zipfile.ZipFile(source) as base, zipfile.ZipFile(path, "w") as out:
        for item in base.infolist():
            data = base.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = sheet_xml.encode()
            if item.filename == "[Content_Types].xml" and strings is not None:
                data = data.replace(
                    b"</Types>",
                    b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
                    b'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
                    b"</Types>",
                )
            if item.filename == "xl/_rels/workbook.xml.rels" and strings is not None:
                data = data.replace(
                    b"</Relationships>",
                    b'<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/'
                    b'officeDocument/2006/relationships/sharedStrings" '
                    b'Target="sharedStrings.xml"/></Relationships>',
                )
            out.writestr(item, data)
        if strings is not None:
            items = "".join(f"<si><t>{text}</t></si>" for text in strings)
            out.writestr("xl/sharedStrings.xml", f'<sst xmlns="{MAIN}">{items}</sst>')
    return path


def rows(path: Path, **kwargs: Any) -> list[RawRow]:
    kwargs.setdefault("columns", COLUMNS)
    return list(read_rows(path, FileFormat.XLSX, **kwargs))


def values(path: Path, **kwargs: Any) -> list[tuple[int, dict[str, Any] | None]]:
    return [(row.number, row.values) for row in rows(path, **kwargs)]


# --- cells ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        ("", ""),
        (" x ", " x "),
        (3, "3"),
        (3.0, "3"),
        (-12.0, "-12"),
        (2.5, "2.5"),
        (1e-7, "0.0000001"),
        (1e20, "100000000000000000000"),
        (True, "true"),
        (False, "false"),
        (date(2024, 1, 5), "2024-01-05"),
        (datetime(2024, 1, 5), "2024-01-05"),
        (datetime(2024, 1, 5, 10, 30, 15), "2024-01-05T10:30:15"),
        (time(7, 45), "07:45:00"),
        (timedelta(hours=1, seconds=30), "PT3630S"),
    ],
)
def test_cell_values_read_as_csv_cells(value: Any, text: str | None) -> None:
    assert cell_text(value) == text


def test_typed_cells_of_a_workbook(tmp_path: Path) -> None:
    path = book_file(
        tmp_path,
        ("S", [["name", "email", "age"], [date(2020, 2, 29), True, 4.0], [1.25, None, "  "]]),
    )
    assert values(path) == [
        (1, {"name": "2020-02-29", "email": "true", "age": "4"}),
        (2, {"name": "1.25", "age": "  "}),
    ]


# --- rows and header --------------------------------------------------------------------


@pytest.mark.parametrize("write_only", [False, True])
def test_first_non_empty_row_is_the_header_and_empty_rows_are_skipped(
    tmp_path: Path, write_only: bool
) -> None:
    sheet = [
        [],
        [None, None],
        ["Name", "EMAIL", "age", None, "notes"],
        ["Ada", "ada@x.io", 36],
        [None, None, None],
        [],
        ["Alan", None, None, None, "n", "beyond the header"],
    ]
    path = book_file(tmp_path, ("S", sheet), write_only=write_only)

    assert read_header(path, FileFormat.XLSX) == ["Name", "EMAIL", "age", "", "notes"]
    assert values(path) == [
        (1, {"name": "Ada", "email": "ada@x.io", "age": "36"}),
        (2, {"name": "Alan"}),
    ]
    assert rows(path, keep_raw=True)[1].raw == {"Name": "Alan", "notes": "n"}
    assert count_rows(path, FileFormat.XLSX) == 2


def test_missing_required_columns_and_empty_sheets_are_file_errors(tmp_path: Path) -> None:
    path = book_file(tmp_path, ("S", [["name"], ["Ada"]]), ("Empty", []))
    with pytest.raises(FileFormatError, match="Missing required column"):
        rows(path, required=["email"])
    with pytest.raises(FileFormatError, match="The sheet is empty"):
        rows(path, sheet="Empty")
    with pytest.raises(FileFormatError, match="The sheet is empty"):
        count_rows(path, FileFormat.XLSX, sheet="Empty")


def test_column_map_applies_to_the_header(tmp_path: Path) -> None:
    path = book_file(tmp_path, ("S", [["Full name", "mail"], ["Ada", "a@x.io"]]))
    found = values(path, column_map={"Full name": "name", "mail": "email"})
    assert found == [(1, {"name": "Ada", "email": "a@x.io"})]


def test_xml_as_other_programs_write_it(tmp_path: Path) -> None:
    """Prefixed names, rows and cells without references, shared and inline rich text,
    CDATA, formulas' cached values, errors, booleans, ISO dates and valueless cells."""
    sheet = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<x:worksheet xmlns:x="{MAIN}"><x:sheetData>'
        '<x:row><x:c t="s"><x:v>0</x:v></x:c><x:c t="s"><x:v>1</x:v></x:c>'
        '<x:c t="s"><x:v>2</x:v></x:c></x:row>'
        '<x:row><x:c s="0"/><x:c t="str"><x:f>A1</x:f><x:v></x:v></x:c></x:row>'
        '<x:row><x:c t="inlineStr"><x:is><x:r><x:t>Ad</x:t></x:r><x:r><x:t>a</x:t></x:r>'
        '</x:is></x:c><x:c><x:v><![CDATA[12]]></x:v></x:c><x:c t="b"><x:v>1</x:v></x:c></x:row>'
        '<x:row><x:c r="A9" t="str"><x:f>1+1</x:f><x:v>two</x:v></x:c>'
        '<x:c r="C9" t="e"><x:v>#N/A</x:v></x:c></x:row>'
        '<x:row><x:c r="B10" t="d"><x:v>2024-03-01T12:00:00</x:v></x:c></x:row>'
        "</x:sheetData></x:worksheet>"
    )
    path = sheet_file(tmp_path, sheet, strings=["name", "email", "age"])

    assert values(path) == [
        (1, {"name": "Ada", "email": "12", "age": "true"}),
        (2, {"name": "two", "age": "#N/A"}),
        (3, {"email": "2024-03-01T12:00:00"}),
    ]
    assert count_rows(path, FileFormat.XLSX) == 3


# --- chunks -----------------------------------------------------------------------------


@pytest.mark.parametrize("write_only", [False, True])
@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 50])
def test_every_chunk_reads_its_own_rows(tmp_path: Path, write_only: bool, chunk_rows: int) -> None:
    sheet: list[list[Any]] = [["name", "email"]]
    for n in range(1, 41):
        sheet.append([f"n{n}", f"{n}@x.io"])
        if n % 6 == 0:
            sheet.append([])
    path = book_file(tmp_path, ("S", sheet), write_only=write_only)
    whole = values(path)

    counted = count_chunks(path, FileFormat.XLSX, chunk_rows)

    assert counted.total == len(whole) == 40
    firsts = [start.first_row for start in counted.chunks]
    assert firsts == (list(range(1, 41, chunk_rows)) if chunk_rows < 40 else [1])
    read: list[tuple[int, dict[str, Any] | None]] = []
    for start in counted.chunks:
        read += values(path, start=start, limit=chunk_rows)
    assert read == whole


def test_a_chunk_offset_is_a_place_in_the_chosen_sheet(tmp_path: Path) -> None:
    names = [["name"], *([f"r{n}"] for n in range(1, 21))]
    path = book_file(tmp_path, ("First", [["name"], ["other"]]), ("Second", names))
    counted = count_chunks(path, FileFormat.XLSX, 5, sheet="Second")
    assert counted.total == 20
    chunk = counted.chunks[2]
    assert [r.values for r in rows(path, sheet="Second", start=chunk, limit=2)] == [
        {"name": "r11"},
        {"name": "r12"},
    ]
    assert rows(path, start=ChunkStart(1, -1), limit=1)[0].values == {"name": "other"}


# --- sheets and broken files ------------------------------------------------------------


def test_sheet_choice(tmp_path: Path) -> None:
    path = book_file(tmp_path, ("Notes", [["name"], ["x"]]), ("People", [["name"], ["Ada"]]))
    assert sheet_names(path) == ["Notes", "People"]
    assert check_sheet(path, None) == "Notes"
    assert check_sheet(path, "PEOPLE") == "People"
    assert values(path, sheet="People") == [(1, {"name": "Ada"})]
    with pytest.raises(UnknownSheet) as raised:
        check_sheet(path, "Nope")
    assert str(raised.value) == "Unknown sheet 'Nope': the workbook's sheets are 'Notes', 'People'"
    assert raised.value.names == ["Notes", "People"]


@pytest.mark.parametrize(
    "content",
    [
        b"name,email\nAda,a@x.io\n",
        b"PK\x03\x04garbage",
        gzip.compress(header_workbook(["name"])),
    ],
)
def test_a_broken_workbook_is_a_file_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.xlsx"
    path.write_bytes(content)
    with pytest.raises(FileFormatError, match="The file is not a readable XLSX workbook"):
        rows(path)
    with pytest.raises(FileFormatError, match="The file is not a readable XLSX workbook"):
        count_chunks(path, FileFormat.XLSX, 10)


def test_a_zip_that_is_no_workbook_and_bad_sheet_xml_are_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "other.xlsx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "hi")
    with pytest.raises(FileFormatError, match="not a readable XLSX workbook"):
        rows(path)
    bad = sheet_file(tmp_path, f'<worksheet xmlns="{MAIN}"><sheetData><row><c><v>1</v></row>')
    with pytest.raises(FileFormatError, match="not a readable XLSX workbook"):
        rows(bad, columns=["x"])


def _peak_reading(tmp_path: Path, count: int) -> int:
    """The peak of memory allocated while reading a sheet of ``count`` rows."""
    path = tmp_path / f"large-{count}.xlsx"
    book = WorkbookStream()
    book.row(COLUMNS)
    with path.open("wb") as out:
        for n in range(count):
            book.row([f"Name {n}", f"user{n}@example.com", n % 90])
            if n % 1000 == 0:
                out.write(book.take())
        book.finish()
        out.write(book.take())
    tracemalloc.start()
    try:
        last = 0
        for row in read_rows(path, FileFormat.XLSX, columns=COLUMNS):
            last = row.number
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last == count
    return peak


def test_reading_a_large_sheet_keeps_memory_flat(tmp_path: Path) -> None:
    small, large = _peak_reading(tmp_path, 15_000), _peak_reading(tmp_path, 60_000)
    # Four times the rows (2 MB then 8 MB of XML), the same memory.
    assert large < small * 1.2, (small, large)


# --- the writer -------------------------------------------------------------------------


def test_the_streamed_workbook_reads_back(tmp_path: Path) -> None:
    book = WorkbookStream("Rows & more")
    chunks = []
    book.row(["text", "int", "float", "bool", "json", "none"])
    book.row(["a<b>&\x01c", 7, 2.5, False, {"k": [1]}, None])
    chunks.append(book.take())
    book.finish()
    chunks.append(book.take())
    path = tmp_path / "w.xlsx"
    path.write_bytes(b"".join(chunks))

    read = load_workbook(path)
    assert read.sheetnames == ["Rows & more"]
    assert list(read.active.values) == [
        ("text", "int", "float", "bool", "json", "none"),
        ("a<b>&c", 7, 2.5, False, '{"k": [1]}', None),
    ]


# --- gzip -------------------------------------------------------------------------------


def test_compressed_uploads_are_known_by_name_or_type() -> None:
    assert detect_format("rows.csv.gz", None) is FileFormat.CSV
    assert detect_format("C:\\data\\rows.JSONL.GZ", "application/gzip") is FileFormat.JSONL
    assert detect_format("rows.json", "application/gzip") is FileFormat.JSON
    assert detect_format("rows.gz", "text/csv") is None  # no format under the .gz
    assert detect_format("upload", "application/gzip") is None
    assert detect_format("book.xlsx", None) is FileFormat.XLSX
    assert detect_format(None, XLSX_TYPE) is FileFormat.XLSX
    assert is_compressed("rows.csv.gz", None) and is_compressed("rows.csv", "application/gzip")
    assert not is_compressed("rows.csv", "text/csv")


XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.mark.parametrize("chunk_rows", [0, 4])
def test_gzip_files_read_as_the_uncompressed_ones(tmp_path: Path, chunk_rows: int) -> None:
    text = "name,email\n" + "".join(f"n{n},{n}@x.io\n" for n in range(1, 11))
    plain = tmp_path / "rows.csv"
    plain.write_text(text)
    packed = tmp_path / "rows.csv.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    lines = tmp_path / "rows.jsonl.gz"
    lines.write_bytes(gzip.compress(b'{"name": "a"}\n\n{"name": "b"}\n'))

    expected = list(read_rows(plain, FileFormat.CSV, columns=COLUMNS))
    assert list(read_rows(packed, FileFormat.CSV, columns=COLUMNS)) == expected
    counted = count_chunks(packed, FileFormat.CSV, chunk_rows)
    assert counted == count_chunks(plain, FileFormat.CSV, chunk_rows)
    if chunk_rows:
        start = counted.chunks[1]
        chunk = list(read_rows(packed, FileFormat.CSV, columns=COLUMNS, start=start, limit=4))
        assert chunk == expected[4:8]
    assert [r.values for r in read_rows(lines, FileFormat.JSONL, columns=COLUMNS)] == [
        {"name": "a"},
        {"name": "b"},
    ]


@pytest.mark.parametrize("fmt", [FileFormat.CSV, FileFormat.JSONL, FileFormat.JSON])
def test_a_corrupt_gzip_stream_is_a_file_error(tmp_path: Path, fmt: FileFormat) -> None:
    body = {
        FileFormat.CSV: b"name\n" + b"x\n" * 50_000,
        FileFormat.JSONL: b'{"name": "x"}\n' * 20_000,
        FileFormat.JSON: b"[" + b'{"name": "x"},' * 20_000 + b'{"name": "y"}]',
    }[fmt]
    whole = gzip.compress(body)
    for content in (whole[: len(whole) // 2], whole[:-4] + b"\0\0\0\0"):
        path = tmp_path / f"rows.{fmt.value}.gz"
        path.write_bytes(content)
        with pytest.raises(FileFormatError, match="not a valid gzip stream"):
            list(read_rows(path, fmt, columns=["name"]))
        with pytest.raises(FileFormatError, match="not a valid gzip stream"):
            count_rows(path, fmt)


# --- plain XML without a parser ---------------------------------------------------------

TRICKY: list[list[Any]] = [
    ["name", "email", "age", "when", "flag"],
    ["a & b <c> \"q\" 'x'", "  spaced  ", 1.5, datetime(2021, 3, 4, 5, 6, 7), True],
    ["multi\nline\ttab", "émoji 🎉", -3, date(1999, 12, 31), False],
    ["=1+2", None, 10**12, 0.1, ""],
    [None, None, None, None, None],
    ["x", "y", 2.0, "2021-01-01", "text"],
]


@pytest.mark.parametrize("write_only", [False, True])
def test_plain_xml_reads_as_the_parser_reads_it(
    tmp_path: Path, write_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = book_file(tmp_path, ("S", TRICKY), write_only=write_only)
    columns = ["name", "email", "age", "when", "flag"]
    parser = xlsx.XML
    parses: list[int] = []
    monkeypatch.setattr(xlsx, "XML", lambda text: parses.append(1) or parser(text))
    quick = [(r.number, r.values, r.raw) for r in rows(path, columns=columns, keep_raw=True)]
    assert not parses  # read without the parser

    monkeypatch.setattr(xlsx._Sheet, "_plain_rows", lambda *_: None)
    parsed = [(r.number, r.values, r.raw) for r in rows(path, columns=columns, keep_raw=True)]

    assert quick == parsed
    assert quick[0][1] == {
        "name": "a & b <c> \"q\" 'x'",
        "email": "  spaced  ",
        "age": "1.5",
        "when": "2021-03-04T05:06:07",
        "flag": "true",
    }
    assert quick[1][1] is not None and quick[1][1]["email"] == "émoji 🎉"


def test_the_streamed_workbook_reads_plain_and_parsed_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = WorkbookStream()
    for row in TRICKY:
        book.row(row)
    book.finish()
    path = tmp_path / "stream.xlsx"
    path.write_bytes(book.take())
    columns = ["name", "email", "age", "when", "flag"]
    quick = [(r.number, r.values) for r in rows(path, columns=columns)]
    monkeypatch.setattr(xlsx._Sheet, "_plain_rows", lambda *_: None)
    assert quick == [(r.number, r.values) for r in rows(path, columns=columns)]
    assert len(quick) == 4
