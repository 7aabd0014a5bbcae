"""The rows a run still has to process: the file's rows minus those already final, each
with its stored record when it has one (a row waiting for a signal when its worker stopped
resumes from its stored progress)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from itertools import dropwhile, islice
from pathlib import Path
from typing import Any
from uuid import UUID

from bulkops.definition.operation import OperationDefinition
from bulkops.formats import ChunkStart, FileFormat, RawRow, read_rows
from bulkops.formats.base import KeyMatcher
from bulkops.storage.ports import OperationStore, RowStore
from bulkops.storage.records import ChunkRecord, OperationRecord, RowRecord

_BATCH = 5_000
BATCH_SIZE = 128
RowBatch = list[tuple[RawRow, RowRecord | None]]


def operation_rows(
    path: Path,
    definition: OperationDefinition,
    file_format: str,
    column_map: Mapping[str, str] | None,
    *,
    start: ChunkStart | None = None,
    limit: int | None = None,
    sheet: str | None = None,
    fixes: Mapping[int, dict[str, Any]] | None = None,
) -> Generator[RawRow, None, None]:
    """The raw rows of an operation's stored file, read as its definition says (from
    ``start`` for at most ``limit`` rows when given, an XLSX file from worksheet
    ``sheet``; see ``formats.read_rows``); the rows numbered in ``fixes`` are read from
    that data instead of the file."""
    fmt = FileFormat(file_format)
    rows = read_rows(
        path,
        fmt,
        columns=definition.columns,
        required=definition.required_columns,
        keep_raw=definition.track_row_data,
        drop_empty=fmt is FileFormat.CSV,
        column_map=column_map,
        delimiter=definition.controls.csv_delimiter,
        start=start,
        limit=limit,
        sheet=sheet,
    )
    if not fixes:
        return rows
    # An empty cell is a missing value, as the readers of CSV and XLSX files leave it.
    data = RowData(definition, drop_empty=fmt in CELL_FORMATS, column_map=column_map)
    return _overlaid(rows, fixes, data, keep_raw=definition.track_row_data)


def read_chunk(
    path: Path,
    definition: OperationDefinition,
    chunk: ChunkRecord,
    file_format: str,
    column_map: Mapping[str, str] | None,
    sheet: str | None = None,
    fixes: Mapping[int, dict[str, Any]] | None = None,
) -> Generator[RawRow, None, None]:
    """The raw rows of ``chunk`` of an operation's stored file (read from the chunk's
    offset when it is known, else from the start of the file; an XLSX file from
    worksheet ``sheet``), those numbered in ``fixes`` read from that data instead. Close
    it when done."""
    start = ChunkStart(chunk.first_row, chunk.offset) if chunk.offset >= 0 else None
    limit = chunk.row_count if start is not None else None
    reader = operation_rows(
        path,
        definition,
        file_format,
        column_map,
        start=start,
        limit=limit,
        sheet=sheet,
        fixes=fixes,
    )
    first = chunk.first_row
    try:
        yield from islice(dropwhile(lambda raw: raw.number < first, reader), chunk.row_count)
    finally:
        reader.close()


CELL_FORMATS = (FileFormat.CSV, FileFormat.XLSX)  # files of cells, where empty means missing


class RowData:
    """Raw rows rebuilt from row data kept under the file's column names (a tracked row's
    data, a fix), as the file's reader would have read them."""

    def __init__(
        self,
        definition: OperationDefinition,
        *,
        drop_empty: bool,
        column_map: Mapping[str, str] | None = None,
    ) -> None:
        self._matcher = KeyMatcher(definition.columns, column_map)
        self._drop_empty = drop_empty

    def raw(self, number: int, data: dict[str, Any], *, keep_raw: bool = True) -> RawRow:
        """Row ``number`` with ``data`` (with ``drop_empty`` an empty cell is a missing
        value)."""
        values = self._matcher.values(data, copy=True)
        if self._drop_empty:
            values = {key: value for key, value in values.items() if value != ""}
        return RawRow(number, values, data if keep_raw else None)


def _overlaid(
    rows: Generator[RawRow, None, None],
    fixes: Mapping[int, dict[str, Any]],
    data: RowData,
    *,
    keep_raw: bool,
) -> Generator[RawRow, None, None]:
    try:
        for raw in rows:
            fixed = fixes.get(raw.number)
            yield raw if fixed is None else data.raw(raw.number, fixed, keep_raw=keep_raw)
    finally:
        rows.close()


async def source_fixes(
    operations: OperationStore, rows: RowStore, record: OperationRecord
) -> dict[int, dict[str, Any]] | None:
    """The fixed rows' data an operation created from an earlier one reads instead of the
    file's records: its source's fixes over those of the source's own source, and so on
    (each read the same file). None for an operation read from its own upload."""
    chain: list[UUID] = []
    current: OperationRecord | None = record
    while current is not None and current.source_operation_id is not None:
        if current.source_operation_id in chain or len(chain) >= _MAX_SOURCES:
            break
        chain.append(current.source_operation_id)
        current = await operations.get(current.source_operation_id)
    if not chain:
        return None
    fixes: dict[int, dict[str, Any]] = {}
    for operation_id in reversed(chain):  # the oldest first: later fixes win
        fixes.update(await rows.fixes(operation_id))
    return fixes


_MAX_SOURCES = 1000  # a chain of runs from earlier ones longer than this is cut there


class StoredRows:
    """Answers "what is stored for row N?" for ascending N by walking the stored records in
    keyset batches, so resuming a million-row operation never loads them all at once."""

    def __init__(self, records: AsyncIterator[RowRecord], first: RowRecord) -> None:
        self._records = records
        self._current: RowRecord | None = first

    @classmethod
    async def load(cls, rows: RowStore, operation_id: UUID, after: int = 0) -> StoredRows | None:
        """A cursor over the records above row ``after`` when there are any, else None."""
        records = rows.iterate(operation_id, batch_size=_BATCH, after=after)
        first = await anext(records, None)
        return None if first is None else cls(records, first)

    @property
    def next_number(self) -> int:
        """The number of the next stored row ``find`` has not passed (no limit when none)."""
        return self._current.row_number if self._current is not None else 2**63

    async def find(self, row_number: int) -> RowRecord | None:
        """The stored record of ``row_number``, or None. Call with ascending numbers."""
        while self._current is not None and self._current.row_number < row_number:
            self._current = await anext(self._records, None)
        if self._current is not None and self._current.row_number == row_number:
            return self._current
        return None


class FileRows:
    """The raw rows of a file still to run, in batches."""

    def __init__(self, reader: Iterator[RawRow], stored: StoredRows | None) -> None:
        self._reader = reader
        self._stored = stored

    def __aiter__(self) -> FileRows:
        return self

    async def __anext__(self) -> RowBatch:
        if self._stored is None:  # a fresh run: every row runs
            batch: RowBatch = [(raw, None) for raw in islice(self._reader, BATCH_SIZE)]
        else:
            batch = []
            for raw in self._reader:
                existing = await self._stored.find(raw.number)
                if existing is None or not existing.state.is_final:
                    batch.append((raw, existing))
                    if len(batch) >= BATCH_SIZE:
                        break
        if not batch:
            raise StopAsyncIteration
        return batch
