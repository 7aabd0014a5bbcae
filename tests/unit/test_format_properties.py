"""Properties of the readers: any bytes end in rows or one clear file error, within bounded
memory, and data exported as CSV reads back to the same rows."""

from __future__ import annotations

import csv
import json
import tracemalloc
import uuid
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bulkops.errors import FileFormatError
from bulkops.formats import (
    FileFormat,
    RawRow,
    base,
    count_chunks,
    count_rows,
    csvfile,
    jsonlines,
    read_rows,
)
from bulkops.formats.base import MAX_RECORD_BYTES
from bulkops.service.export import DATA_COLUMNS, _DataCsv
from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState
from bulkops.wire import unescape_formula

COLUMNS = ["email", "name", "age"]
PROPERTY = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _read_all(path: Path, fmt: FileFormat) -> tuple[list[RawRow], FileFormatError | None]:
    """Every row up to the first file error, and that error."""
    got: list[RawRow] = []
    try:
        for row in read_rows(path, fmt, columns=COLUMNS, keep_raw=True):
            got.append(row)
    except FileFormatError as exc:
        assert str(exc), "a file error says what is wrong"
        return got, exc
    return got, None


def _check(path: Path, fmt: FileFormat) -> None:
    got, error = _read_all(path, fmt)
    assert [row.number for row in got] == list(range(1, len(got) + 1))
    for row in got:
        assert (row.values is None) == (row.error is not None)
        assert row.error is None or row.error.startswith(f"Row {row.number}")
    if error is None:
        assert count_rows(path, fmt) == len(got)
    else:
        with pytest.raises(FileFormatError):
            count_rows(path, fmt)


@pytest.mark.parametrize("fmt", list(FileFormat))
@PROPERTY
@given(data=st.binary(max_size=400))
def test_any_bytes_end_in_rows_or_one_file_error(
    tmp_path: Path, fmt: FileFormat, data: bytes
) -> None:
    path = tmp_path / f"any.{fmt.value}"
    path.write_bytes(data)
    _check(path, fmt)


@PROPERTY
@given(
    elements=st.lists(json_values, max_size=6),
    cut=st.integers(min_value=0, max_value=400),
    noise=st.binary(max_size=3),
)
def test_mangled_json_arrays_end_in_rows_or_one_file_error(
    tmp_path: Path, elements: list[object], cut: int, noise: bytes
) -> None:
    text = json.dumps(elements).encode()
    path = tmp_path / "mangled.json"
    path.write_bytes(text[:cut] + noise + text[cut:])
    _check(path, FileFormat.JSON)


@PROPERTY
@given(elements=st.lists(json_values, max_size=6))
def test_json_arrays_and_lines_read_every_element(tmp_path: Path, elements: list[object]) -> None:
    array, lines = tmp_path / "a.json", tmp_path / "a.jsonl"
    array.write_text(json.dumps(elements, indent=1))
    lines.write_text("".join(json.dumps(e) + "\n" for e in elements))
    for path, fmt in ((array, FileFormat.JSON), (lines, FileFormat.JSONL)):
        got, error = _read_all(path, fmt)
        assert error is None
        assert len(got) == len(elements) == count_rows(path, fmt)
        for row, element in zip(got, elements, strict=True):
            assert (row.raw == element) if isinstance(element, dict) else row.error


cells = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00\r"))


@PROPERTY
@given(records=st.lists(st.tuples(cells, cells, cells), min_size=1, max_size=15))
def test_data_exported_as_csv_reads_back_to_the_same_rows(
    tmp_path: Path, records: list[tuple[str, str, str]]
) -> None:
    operation_id = uuid.uuid4()
    encoder = _DataCsv(COLUMNS)
    for number, (email, name, age) in enumerate(records, start=1):
        data = {"email": email, "name": name, "age": age}
        encoder.write(RowRecord(operation_id, number, RowState.FAILED, row_data=data))
    encoder.finish()
    path = tmp_path / "export.csv"
    path.write_bytes(encoder.take().encode())
    got = list(read_rows(path, FileFormat.CSV, columns=COLUMNS, keep_raw=True))
    # Cells a spreadsheet would run as formulas come back with the export's leading ',
    # which ``bulkops fix`` (and a fix from a data export) removes again.
    values = [{k: unescape_formula(v) for k, v in (row.values or {}).items()} for row in got]
    assert values == [{"email": e, "name": n, "age": a} for e, n, a in records]
    assert all(row.raw and set(row.raw) == {*COLUMNS, *DATA_COLUMNS} for row in got)


# --- hostile files: a clear answer in bounded memory --------------------------------------

HOSTILE_PEAK = 64 * 1024 * 1024  # far below the 100 MB these files would cost if held


def _peak_while(path: Path, fmt: FileFormat) -> tuple[list[RawRow], FileFormatError | None, int]:
    tracemalloc.start()
    try:
        got, error = _read_all(path, fmt)
        if error is None:
            assert count_rows(path, fmt) == len(got)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return got, error, peak


def _write_huge_field(path: Path, before: bytes, after: bytes, size: int) -> None:
    with path.open("wb") as fh:
        fh.write(before)
        block = b"x" * (1024 * 1024)
        for _ in range(size // len(block)):
            fh.write(block)
        fh.write(after)


@pytest.mark.parametrize(
    ("fmt", "before", "after"),
    [
        (FileFormat.CSV, b"email,name\nbig@x.io,", b"\nok@x.io,Ok\n"),
        (FileFormat.JSONL, b'{"email": "big@x.io", "name": "', b'"}\n{"email": "ok@x.io"}\n'),
        (FileFormat.JSON, b'[{"email": "big@x.io", "name": "', b'"}, {"email": "ok@x.io"}]'),
    ],
)
def test_a_field_larger_than_a_record_is_one_failed_row(
    tmp_path: Path, fmt: FileFormat, before: bytes, after: bytes
) -> None:
    path = tmp_path / f"huge.{fmt.value}"
    _write_huge_field(path, before, after, 2 * MAX_RECORD_BYTES + 12345)
    got, error, peak = _peak_while(path, fmt)
    assert error is None
    assert [row.number for row in got] == [1, 2]
    assert got[0].error == "Row 1: record is larger than 8 MiB"
    assert got[1].values == {
        "email": "ok@x.io",
        **({"name": "Ok"} if fmt is FileFormat.CSV else {}),
    }
    assert peak < HOSTILE_PEAK, peak


@pytest.mark.parametrize("fmt", [FileFormat.JSON, FileFormat.JSONL])
def test_json_nested_100000_deep_is_one_failed_row(tmp_path: Path, fmt: FileFormat) -> None:
    depth = 100_000
    deep = b"[" * depth + b"]" * depth
    if fmt is FileFormat.JSON:
        content = b"[" + deep + b', {"email": "ok@x.io"}]'
    else:
        content = deep + b'\n{"email": "ok@x.io"}\n'
    path = tmp_path / f"deep.{fmt.value}"
    path.write_bytes(content)
    got, error, peak = _peak_while(path, fmt)
    assert error is None
    assert got[0].error == "Row 1: JSON is nested too deeply"
    assert got[1].values == {"email": "ok@x.io"}
    assert peak < HOSTILE_PEAK, peak


def test_a_whole_file_nested_deep_is_a_clear_file_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 200_000)
    got, error, peak = _peak_while(path, FileFormat.JSON)
    assert got == [] or got[0].error is not None
    assert error is not None and "near row 1" in str(error)
    assert peak < HOSTILE_PEAK, peak


def test_ten_thousand_columns_and_nul_bytes(tmp_path: Path) -> None:
    header = ",".join(["email", *(f"c{i}" for i in range(10_000))])
    row = ",".join(["a@x.io", *("v\x00" for _ in range(10_000))])
    path = tmp_path / "wide.csv"
    path.write_text(f"{header}\n{row}\n{row}\n")
    got, error, _ = _peak_while(path, FileFormat.CSV)
    assert error is None
    assert [r.values for r in got] == [{"email": "a@x.io"}] * 2


@pytest.mark.parametrize("fmt", [FileFormat.CSV, FileFormat.JSONL, FileFormat.JSON])
def test_invalid_utf8_is_a_file_error_naming_the_row(tmp_path: Path, fmt: FileFormat) -> None:
    bodies = {
        FileFormat.CSV: b"email\na@x.io\n\xff\xfe@x.io\n",
        FileFormat.JSONL: b'{"email": "a@x.io"}\n{"email": "\xff"}\n',
        FileFormat.JSON: b'[{"email": "a@x.io"}, {"email": "\xff"}]',
    }
    path = tmp_path / f"bad.{fmt.value}"
    path.write_bytes(bodies[fmt])
    got, error = _read_all(path, fmt)
    assert [row.number for row in got] == [1]
    assert error is not None and str(error) == "File is not valid UTF-8 (near row 2)"


@pytest.mark.parametrize(
    ("content", "rows", "failure"),
    [
        (b"[" + b"9" * 5000 + b', {"email": "a"}]', 2, None),
        (b"[" + b"9" * 5000 + b"}", 0, "unexpected '}'"),
        (b"[" + b"[" * 3000 + b'"a\\"]"' + b"]" * 3000 + b"]", 1, None),
    ],
)
def test_values_the_decoder_refuses_are_read_past(
    tmp_path: Path, content: bytes, rows: int, failure: str | None
) -> None:
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    got, error = _read_all(path, FileFormat.JSON)
    assert len(got) == rows and (not got or got[0].error)
    assert (error is None) if failure is None else (failure in str(error))


def _read_chunked(path: Path, fmt: FileFormat, chunk_rows: int) -> list[RawRow]:
    counted = count_chunks(path, fmt, chunk_rows)
    starts = counted.chunks
    ends = [start.first_row for start in starts[1:]] + [counted.total + 1]
    got: list[RawRow] = []
    for start, end in zip(starts, ends, strict=True):
        limit = end - start.first_row
        got += read_rows(path, fmt, columns=COLUMNS, keep_raw=True, start=start, limit=limit)
    return got


@PROPERTY
@given(
    data=st.binary(max_size=300)
    | st.lists(
        st.sampled_from(["a,b,c", '"x\ny",1,2', "", "1,2", '"bad"x,1,2', "\ufeffq,r,s"]),
        max_size=12,
    ).map(lambda lines: ("email,name,age\n" + "\n".join(lines)).encode()),
    fmt=st.sampled_from([FileFormat.CSV, FileFormat.JSONL]),
    chunk_rows=st.integers(1, 4),
)
def test_reading_chunk_by_chunk_from_their_offsets_gives_the_whole_file(
    tmp_path: Path, data: bytes, fmt: FileFormat, chunk_rows: int
) -> None:
    path = tmp_path / f"{uuid.uuid4().hex}.{fmt.value}"
    path.write_bytes(data)
    whole, error = _read_all(path, fmt)
    if error is not None:
        return  # a file error stops processing before any chunk is made
    counted = count_chunks(path, fmt, chunk_rows)
    assert counted.total == len(whole)
    if len(counted.chunks) > 1:
        assert all(start.offset >= 0 for start in counted.chunks)
        assert [s.first_row for s in counted.chunks] == list(range(1, len(whole) + 1, chunk_rows))
    assert _read_chunked(path, fmt, chunk_rows) == whole


def test_jsonl_chunks_seek_to_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    lines = [json.dumps({"email": f"u{n}@x.io", "name": "é" * n}) for n in range(1, 11)]
    path.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    counted = count_chunks(path, FileFormat.JSONL, 4)
    assert counted.total == 10 and [s.first_row for s in counted.chunks] == [1, 5, 9]
    with path.open("rb") as fh:
        fh.seek(counted.chunks[1].offset)
        assert json.loads(fh.readline())["email"] == "u5@x.io"
    assert [r.values["email"] for r in _read_chunked(path, FileFormat.JSONL, 4) if r.values] == [
        f"u{n}@x.io" for n in range(1, 11)
    ]


def test_a_json_array_is_one_chunk(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"email": str(n)} for n in range(10)]))
    counted = count_chunks(path, FileFormat.JSON, 3)
    assert counted.total == 10 and len(counted.chunks) == 1


_LINE_PARTS = st.sampled_from(
    [b"a,b,c", b'"x\ny",1,2', b"", b"1,2", b"q\rr,s,t", b"n\x00ul,1,2", b"\xff,1,2", b"w" * 40]
)


@PROPERTY
@given(
    lines=st.lists(
        st.lists(st.just(b"a@x.io,Ada,36"), max_size=6) | st.lists(_LINE_PARTS), max_size=8
    ),
    ending=st.sampled_from([b"\n", b"\r\n"]),
    last_lf=st.booleans(),
    block=st.integers(8, 64),
    chunk_rows=st.integers(1, 3),
)
def test_csv_blocks_read_as_the_lines_do(
    tmp_path: Path,
    lines: list[list[bytes]],
    ending: bytes,
    last_lf: bool,
    block: int,
    chunk_rows: int,
) -> None:
    """The block path reads exactly what the checked line-by-line path reads, whatever a
    block holds: quotes, lone CRs, NUL bytes, bad UTF-8, lines longer than a csv field."""
    body = ending.join([b"email,name,age", *(line for run in lines for line in run)])
    path = tmp_path / f"{uuid.uuid4().hex}.csv"
    path.write_bytes(body + ending if last_lf else body)
    field_limit = csv.field_size_limit(30)  # the 40-byte line is longer than a field may be
    try:
        with patch.object(base, "LINE_BLOCK", block):
            by_blocks = _read_all(path, FileFormat.CSV), _chunked_or_error(path, chunk_rows)
        with patch.object(csvfile._Lines, "rest", lambda lines: lines):
            by_lines = _read_all(path, FileFormat.CSV), _chunked_or_error(path, chunk_rows)
    finally:
        csv.field_size_limit(field_limit)
    (rows, error), chunked = by_blocks
    (line_rows, line_error), line_chunked = by_lines
    assert rows == line_rows
    assert str(error) == str(line_error)
    assert chunked == line_chunked


def _chunked_or_error(
    path: Path, chunk_rows: int, fmt: FileFormat = FileFormat.CSV
) -> list[RawRow] | str:
    try:
        return _read_chunked(path, fmt, chunk_rows)
    except FileFormatError as exc:
        return str(exc)


_JSONL_PARTS = st.sampled_from(
    [b'{"email": "a@x.io", "age": 3}', b"", b"  \t", b"[1]", b'{"a": ', b"\xff{}", b"{}" * 40]
)


@PROPERTY
@given(
    lines=st.lists(_JSONL_PARTS, max_size=12),
    ending=st.sampled_from([b"\n", b"\r\n"]),
    last_lf=st.booleans(),
    block=st.integers(8, 64),
    chunk_rows=st.integers(1, 3),
)
def test_jsonl_blocks_read_as_the_lines_do(
    tmp_path: Path, lines: list[bytes], ending: bytes, last_lf: bool, block: int, chunk_rows: int
) -> None:
    """The JSON Lines reader gives the same rows and errors from decoded blocks as line by
    line, whatever the block size: bad UTF-8, lines longer than a block, blank lines."""
    body = ending.join(lines)
    path = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(body + ending if last_lf and lines else body)
    with patch.object(base, "LINE_BLOCK", block):
        by_blocks = (
            _read_all(path, FileFormat.JSONL),
            _chunked_or_error(path, chunk_rows, FileFormat.JSONL),
        )
    with patch.object(jsonlines, "decoded_blocks", lambda fh: iter(())):
        by_lines = (
            _read_all(path, FileFormat.JSONL),
            _chunked_or_error(path, chunk_rows, FileFormat.JSONL),
        )
    (rows, error), chunked = by_blocks
    (line_rows, line_error), line_chunked = by_lines
    assert rows == line_rows
    assert str(error) == str(line_error)
    assert chunked == line_chunked
