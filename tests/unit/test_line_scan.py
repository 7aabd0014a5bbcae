"""Counting rows in blocks of lines gives what parsing record by record gives."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bulkops.formats import csvfile, jsonlines
from bulkops.formats.base import scan_lines

PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CSV_LINES = ["a,b,c", "", "\r", " ", "1,2", "é,ü", "x\x00y", ",,", "\t"]
JSONL_LINES = ['{"a": 1}', "", " \t", "\r", "[1]", '{"é": "\\n"}', "not json", '"x"']


def _file(tmp_path: Path, lines: list[str], newline: str, last: bool, suffix: str) -> Path:
    path = tmp_path / f"{uuid.uuid4().hex}.{suffix}"
    path.write_bytes((newline.join(lines) + (newline if last else "")).encode())
    return path


@PROPERTY
@given(
    lines=st.lists(st.sampled_from(CSV_LINES), max_size=30),
    newline=st.sampled_from(["\n", "\r\n"]),
    last=st.booleans(),
    chunk_rows=st.integers(0, 5),
    block_size=st.integers(1, 40),
)
def test_csv_lines_counted_in_blocks_match_the_parser(
    tmp_path: Path,
    lines: list[str],
    newline: str,
    last: bool,
    chunk_rows: int,
    block_size: int,
) -> None:
    path = _file(tmp_path, ["h1,h2", *lines], newline, last, "csv")
    parsed = csvfile._parse_chunks(path, chunk_rows, None)
    header = len(b"h1,h2" + newline.encode())
    with path.open("rb") as fh:
        fh.seek(header)
        usable = csvfile._one_record_a_line
        scanned = scan_lines(fh, chunk_rows, blank=b"\r", usable=usable, block_size=block_size)
    data = path.read_bytes()[header:]
    lone_cr = data.count(b"\r") != data.count(b"\r\n") + (data.endswith(b"\r") and not last)
    assert scanned == (None if lone_cr else parsed)
    assert csvfile.chunk_csv(path, chunk_rows) == parsed


@PROPERTY
@given(
    lines=st.lists(st.sampled_from(JSONL_LINES), max_size=30),
    newline=st.sampled_from(["\n", "\r\n"]),
    last=st.booleans(),
    chunk_rows=st.integers(0, 5),
    block_size=st.integers(1, 40),
)
def test_jsonl_lines_counted_in_blocks_match_line_by_line(
    tmp_path: Path,
    lines: list[str],
    newline: str,
    last: bool,
    chunk_rows: int,
    block_size: int,
) -> None:
    path = _file(tmp_path, lines, newline, last, "jsonl")
    parsed = jsonlines._parse_chunks(path, chunk_rows)
    with path.open("rb") as fh:
        scanned = scan_lines(fh, chunk_rows, blank=b" \t\r\n", block_size=block_size)
    assert scanned == parsed


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'a,"b\nc"\n', "a quote: a record may span lines"),
        (b"a\rb\n", "a lone CR ends a record"),
        (b"a\n\xff\n", "not UTF-8: the parser names the row"),
    ],
)
def test_csv_blocks_the_scan_cannot_count_are_left_to_the_parser(content: bytes, why: str) -> None:
    usable = csvfile._one_record_a_line
    assert scan_lines(io.BytesIO(content), 2, blank=b"\r", usable=usable) is None, why


def test_a_line_longer_than_a_record_is_left_to_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bulkops.formats.base.MAX_RECORD_BYTES", 10)
    assert scan_lines(io.BytesIO(b"short\n" + b"x" * 20 + b"\n"), 0, blank=b"") is None
    assert scan_lines(io.BytesIO(b"short\n" + b"x" * 20), 0, blank=b"", block_size=4) is None
    assert scan_lines(io.BytesIO(b"short\nshort\n"), 0, blank=b"") == (2, [])
