"""The rows a run still has to process: the file's rows minus those already final, each
with its stored record when it has one (a row waiting for a signal when its worker stopped
resumes from its stored progress)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from itertools import islice
from pathlib import Path
from uuid import UUID

from bulkops.definition.operation import OperationDefinition
from bulkops.formats import ChunkStart, FileFormat, RawRow, read_rows
from bulkops.storage.ports import RowStore
from bulkops.storage.records import RowRecord

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
) -> Generator[RawRow, None, None]:
    """The raw rows of an operation's stored file, read as its definition says (from
    ``start`` for at most ``limit`` rows when given, an XLSX file from worksheet
    ``sheet``; see ``formats.read_rows``)."""
    fmt = FileFormat(file_format)
    return read_rows(
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
