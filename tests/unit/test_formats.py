"""Unit tests of the streaming file readers in bulkops.formats."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bulkops.errors import FileFormatError
from bulkops.formats import FileFormat, RawRow, count_rows, detect_format, read_header, read_rows

COLUMNS = ["email", "name", "age"]


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def rows(path: Path, fmt: FileFormat, **kwargs: object) -> list[RawRow]:
    kwargs.setdefault("columns", COLUMNS)
    return list(read_rows(path, fmt, **kwargs))  # type: ignore[arg-type]


# --- CSV -------------------------------------------------------------------------------


def test_csv_bom_header_is_stripped(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", b"\xef\xbb\xbfemail,name\r\na@x.io,Ann\r\n")
    assert read_header(path, FileFormat.CSV) == ["email", "name"]
    assert [r.values for r in rows(path, FileFormat.CSV)] == [{"email": "a@x.io", "name": "Ann"}]


def test_csv_header_matches_case_insensitively_and_exact_wins(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "EMAIL,Name,name,Extra\nA@X.IO,Upper,lower,zzz\n")
    (row,) = rows(path, FileFormat.CSV)
    assert row.values == {"email": "A@X.IO", "name": "lower"}
    assert row.raw is None


def test_csv_extra_columns_ignored_and_empty_cells_kept(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "id,email,name,age,notes\n1,a@x.io,,30,hello\n")
    (row,) = rows(path, FileFormat.CSV)
    assert row.values == {"email": "a@x.io", "name": "", "age": "30"}


def test_csv_missing_required_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "age,other\n1,2\n")
    with pytest.raises(FileFormatError, match=r"^Missing required column\(s\): email, name$"):
        rows(path, FileFormat.CSV, required=["email", "name"])


@pytest.mark.parametrize("content", ["", "\n\n", "\xef\xbb\xbf"])
def test_csv_empty_file(tmp_path: Path, content: str) -> None:
    path = write(tmp_path, "a.csv", content.encode("latin-1"))
    with pytest.raises(FileFormatError, match="empty"):
        rows(path, FileFormat.CSV)
    with pytest.raises(FileFormatError, match="empty"):
        count_rows(path, FileFormat.CSV)


def test_csv_quoted_newline_and_count_agree(tmp_path: Path) -> None:
    text = 'email,name\n\na@x.io,"Ann\nSmith"\n\nb@x.io,"Bob, Jr."\r\n'
    path = write(tmp_path, "a.csv", text)
    got = rows(path, FileFormat.CSV)
    assert [(r.number, r.values) for r in got] == [
        (1, {"email": "a@x.io", "name": "Ann\nSmith"}),
        (2, {"email": "b@x.io", "name": "Bob, Jr."}),
    ]
    assert count_rows(path, FileFormat.CSV) == 2


def test_csv_uneven_rows(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "email,name,age\na,A,1\nb,B,2,extra\nc\nd,D,4\n")
    got = rows(path, FileFormat.CSV)
    assert [r.number for r in got] == [1, 2, 3, 4]
    assert got[1].values is None
    assert got[1].error == "Row 2: expected 3 fields, found 4"
    assert got[1].raw == {"email": "b", "name": "B", "age": "2", "_extra": ["extra"]}
    assert got[2].values == {"email": "c"}
    assert got[2].error is None
    assert got[3].values == {"email": "d", "name": "D", "age": "4"}
    assert count_rows(path, FileFormat.CSV) == 4


def test_csv_bad_quoting_is_a_row_error_and_reading_continues(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", 'email,name\na,"x"y\nb,B\n')
    got = rows(path, FileFormat.CSV)
    assert got[0].error is not None and got[0].error.startswith("Row 1: ")
    assert got[0].raw == {"_line": 'a,"x"y\n'}
    assert got[1].values == {"email": "b", "name": "B"}
    assert count_rows(path, FileFormat.CSV) == 2


def test_csv_bad_utf8_names_the_row(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", b"email,name\na,A\nb,B\nc,\xff\xfe\nd,D\n")
    reader = read_rows(path, FileFormat.CSV, columns=COLUMNS)
    assert [next(reader).number, next(reader).number] == [1, 2]
    with pytest.raises(FileFormatError, match=r"not valid UTF-8 \(near row 3\)") as info:
        next(reader)
    assert info.value.row_number == 3
    with pytest.raises(FileFormatError, match="near row 3"):
        count_rows(path, FileFormat.CSV)


def test_csv_classic_mac_line_ends(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "email,name\ra,A\rb,B\r")
    assert [r.values for r in rows(path, FileFormat.CSV)] == [
        {"email": "a", "name": "A"},
        {"email": "b", "name": "B"},
    ]
    assert count_rows(path, FileFormat.CSV) == 2


def test_csv_keep_raw(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", "Email,Notes\na@x.io,hi\n")
    (row,) = rows(path, FileFormat.CSV, keep_raw=True)
    assert row.values == {"email": "a@x.io"}
    assert row.raw == {"Email": "a@x.io", "Notes": "hi"}


def test_csv_large_file_streams_in_flat_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["email", "name", "age", "city"])
        for i in range(200_000):
            writer.writerow([f"user{i}@example.com", f"Name {i}", i % 90, "Somewhere"])
    size = path.stat().st_size
    tracemalloc.start()
    try:
        last = 0
        for row in read_rows(path, FileFormat.CSV, columns=COLUMNS):
            assert row.error is None
            last = row.number
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last == 200_000 == count_rows(path, FileFormat.CSV)
    assert peak < size / 20, (peak, size)


_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=st.lists(st.lists(_text, min_size=3, max_size=3), max_size=20))
def test_csv_round_trip_property(tmp_path: Path, records: list[list[str]]) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(["a", "b", "c"])
    writer.writerows(records)
    path = write(tmp_path, "prop.csv", buffer.getvalue())
    got = list(read_rows(path, FileFormat.CSV, columns=["a", "b", "c"]))
    assert [r.values for r in got] == [dict(zip("abc", rec, strict=True)) for rec in records]
    assert count_rows(path, FileFormat.CSV) == len(records)


# --- JSON array ------------------------------------------------------------------------


def test_json_array_happy_path(tmp_path: Path) -> None:
    data = [{"email": "a@x.io", "age": 30, "score": 1.5}, {"EMAIL": "b@x.io", "Name": None}]
    path = write(tmp_path, "a.json", "\ufeff" + json.dumps(data))
    got = rows(path, FileFormat.JSON)
    assert [(r.number, r.values, r.error) for r in got] == [
        (1, {"email": "a@x.io", "age": 30}, None),
        (2, {"email": "b@x.io", "name": None}, None),
    ]
    assert isinstance(got[0].values and got[0].values["age"], int)
    assert count_rows(path, FileFormat.JSON) == 2
    assert read_header(path, FileFormat.JSON) is None


def test_json_exact_key_wins_and_floats(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", '[{"Age": 1, "age": 2.5, "email": "e"}]')
    (row,) = rows(path, FileFormat.JSON, keep_raw=True)
    assert row.values == {"age": 2.5, "email": "e"}
    assert isinstance(row.values["age"], float)
    assert row.raw == {"Age": 1, "age": 2.5, "email": "e"}


def test_json_non_object_element_is_a_row_error(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", '[{"email": "a"}, 5, [1], {"email": "b"}]')
    got = rows(path, FileFormat.JSON)
    assert got[1].error == "Row 2: JSON element is not an object"
    assert got[1].values is None and got[1].raw == {"_value": 5}
    assert got[2].error == "Row 3: JSON element is not an object"
    assert got[3].values == {"email": "b"}
    assert count_rows(path, FileFormat.JSON) == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"email": "a"}', "top-level array"),
        ("  ", "empty"),
        ('[{"email": "a"}, {"email": ', "near row 2"),
        ('[{"email": "a"}] trailing', "near row 2"),
        (b'[{"email": "a"}, {"email": "\xff"}]', r"not valid UTF-8 \(near row 2\)"),
    ],
)
def test_json_file_failures(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = write(tmp_path, "a.json", content)
    with pytest.raises(FileFormatError, match=message):
        rows(path, FileFormat.JSON)
    with pytest.raises(FileFormatError, match=message):
        count_rows(path, FileFormat.JSON)


# --- JSON Lines ------------------------------------------------------------------------


def test_jsonl_blank_lines_and_bad_lines(tmp_path: Path) -> None:
    text = '{"email": "a"}\n\n  \n{"email": oops}\n[1, 2]\n{"email": "b"} x\r\n{"Email": "c"}'
    path = write(tmp_path, "a.jsonl", "\ufeff" + text)
    got = rows(path, FileFormat.JSONL)
    assert [r.number for r in got] == [1, 2, 3, 4, 5]
    assert got[0].values == {"email": "a"}
    assert got[1].error is not None and got[1].error.startswith("Row 2: invalid JSON")
    assert got[1].raw == {"_line": '{"email": oops}'}
    assert got[2].error == "Row 3: JSON line is not an object"
    assert got[2].raw == {"_value": [1, 2]}
    assert got[3].error is not None and "unexpected data" in got[3].error
    assert got[4].values == {"email": "c"} and got[4].raw is None
    assert count_rows(path, FileFormat.JSONL) == 5


def test_jsonl_keep_raw_and_bad_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "a.jsonl", b'{"EMAIL": "a", "x": 1}\n{"email": "\xc3"}\n')
    reader = read_rows(path, FileFormat.JSONL, columns=COLUMNS, keep_raw=True)
    first = next(reader)
    assert first.values == {"email": "a"}
    assert first.raw == {"EMAIL": "a", "x": 1}
    with pytest.raises(FileFormatError, match=r"near row 2"):
        next(reader)


# --- detection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content_type", "expected"),
    [
        ("people.CSV", None, FileFormat.CSV),
        ("C:\\Users\\me\\data.Json", "application/octet-stream", FileFormat.JSON),
        ("dump.ndjson", "text/plain", FileFormat.JSONL),
        ("dump.jsonl", None, FileFormat.JSONL),
        ("export.csv", "application/json", FileFormat.CSV),
        ("upload", "text/csv; charset=utf-8", FileFormat.CSV),
        ("upload.txt", "application/csv", FileFormat.CSV),
        (None, "application/json", FileFormat.JSON),
        (None, "application/x-ndjson", FileFormat.JSONL),
        (None, "application/jsonl", FileFormat.JSONL),
        (None, "application/x-jsonlines", FileFormat.JSONL),
        ("data.bin", "application/octet-stream", None),
        ("noext", None, None),
        (None, None, None),
    ],
)
def test_detect_format(
    name: str | None, content_type: str | None, expected: FileFormat | None
) -> None:
    assert detect_format(name, content_type) is expected


def test_plain_strings_are_accepted_as_formats(tmp_path: Path) -> None:
    path = write(tmp_path, "a.jsonl", '{"email": "a"}\n')
    assert count_rows(path, "jsonl") == 1  # type: ignore[arg-type]
