"""Rows of a retry round: the stored Pending rows, rebuilt from their kept row data."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.resume import RowData
from bulkops.formats import RawRow
from bulkops.storage.records import RowRecord

NO_ROW_DATA = "The row's data was not kept (TrackRowData is off), so it cannot be retried"


class RetrySource:
    """Yields ``(raw row, stored record)`` for every row a retry reset to Pending.

    The raw row is rebuilt from the stored row data (the record as read from the file), so
    a retry re-validates it without re-reading the file.
    """

    def __init__(
        self,
        records: AsyncIterator[RowRecord],
        definition: OperationDefinition,
        *,
        drop_empty: bool,
        column_map: Mapping[str, str] | None = None,
        batch_size: int = 128,
    ) -> None:
        self._records = records
        self._data = RowData(definition, drop_empty=drop_empty, column_map=column_map)
        self._batch_size = batch_size

    def __aiter__(self) -> RetrySource:
        return self

    def _raw(self, record: RowRecord) -> RawRow:
        data = record.row_data
        if data is None:
            return RawRow(record.row_number, None, None, NO_ROW_DATA)
        # An empty CSV cell is a missing value, as in the first run.
        return self._data.raw(record.row_number, data)

    async def __anext__(self) -> list[tuple[RawRow, RowRecord | None]]:
        batch: list[tuple[RawRow, RowRecord | None]] = []
        async for record in self._records:
            batch.append((self._raw(record), record))
            if len(batch) >= self._batch_size:
                break
        if not batch:
            raise StopAsyncIteration
        return batch
