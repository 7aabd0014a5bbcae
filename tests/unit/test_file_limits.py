"""The expanded-size and rows limits of reading one file: real bombs, refused before they
cost more than the limit, in flat memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from bulkops.formats import FileFormat, FileLimits, count_chunks, count_rows, read_rows
from bulkops.formats.limits import ExpandedTooLarge, TooManyRows, applied
from tests.bombs import gzip_csv_bomb, xlsx_bomb

LIMIT = 256 * 1024
PEAK = 16 * 1024 * 1024  # far below what the expansion would cost if held


def _refused(path: Path, fmt: FileFormat) -> ExpandedTooLarge:
    tracemalloc.start()
    try:
        with pytest.raises(ExpandedTooLarge) as caught:
            count_rows(path, fmt, limits=FileLimits(expanded_bytes=LIMIT))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK
    assert f"limit is {LIMIT} bytes" in str(caught.value)
    assert "BULKOPS_MAX_EXPANDED_BYTES" in str(caught.value)
    return caught.value


def test_a_gzip_bomb_is_refused_at_the_limit(tmp_path: Path) -> None:
    path = gzip_csv_bomb(tmp_path / "bomb.csv.gz", 1_000_000)  # 23 MB from about 60 KB
    assert path.stat().st_size < LIMIT
    _refused(path, FileFormat.CSV)
    assert count_rows(path, FileFormat.CSV) == 1_000_000  # no limit: read in full


@pytest.mark.parametrize("part", ["sheet", "strings"])
def test_an_xlsx_bomb_is_refused_at_the_limit(tmp_path: Path, part: str) -> None:
    path = xlsx_bomb(tmp_path / "bomb.xlsx", 200_000, part=part)
    assert path.stat().st_size < LIMIT
    _refused(path, FileFormat.XLSX)


def test_reading_rows_under_limits_stops_at_them_too(tmp_path: Path) -> None:
    path = gzip_csv_bomb(tmp_path / "bomb.csv.gz", 200_000)
    with applied(FileLimits(expanded_bytes=LIMIT)), pytest.raises(ExpandedTooLarge):
        for _ in read_rows(path, FileFormat.CSV, columns=("name", "email", "age")):
            pass


def test_a_file_within_the_limits_is_counted(tmp_path: Path) -> None:
    path = gzip_csv_bomb(tmp_path / "small.csv.gz", 10_000)
    limits = FileLimits(expanded_bytes=1024 * 1024, rows=10_000)
    assert count_rows(path, FileFormat.CSV, limits=limits) == 10_000
    assert count_chunks(path, FileFormat.CSV, 4000, limits=limits).total == 10_000


def test_more_rows_than_the_rows_limit_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("name,email\n" + "a,a@x.io\n" * 11)
    with pytest.raises(TooManyRows, match=r"11 data rows: the limit is 10 rows per file"):
        count_chunks(path, FileFormat.CSV, 5, limits=FileLimits(rows=10))
    assert count_rows(path, FileFormat.CSV, limits=FileLimits(rows=11)) == 11
