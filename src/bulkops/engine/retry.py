"""Rows of a retry round: the stored Pending rows, rebuilt from their kept row data."""

from __future__ import annotations

from collections.abc import AsyncIterator

from bulkops.definition.operation import OperationDefinition
from bulkops.formats import RawRow
from bulkops.formats.base import KeyMatcher
from bulkops.storage.records import RowRecord

NO_ROW_DATA = "The row's data was not kept (TrackRowData is off), so it cannot be retried"


class RetrySource:
    """Yields ``(raw row, stored record)`` for every row a retry reset to Pending.

    The raw row is rebuilt from the stored row data (the record as read from the file), so
    a retry re-validates it without re-reading the file.
    """

    def __init__(self, records: AsyncIterator[RowRecord], definition: OperationDefinition) -> None:
        self._records = records
        self._matcher = KeyMatcher(definition.columns)

    def __aiter__(self) -> RetrySource:
        return self

    async def __anext__(self) -> tuple[RawRow, RowRecord]:
        record = await anext(self._records)  # StopAsyncIteration ends the round
        data = record.row_data
        if data is None:
            return RawRow(record.row_number, None, None, NO_ROW_DATA), record
        values = self._matcher.values(data, copy=True)
        return RawRow(record.row_number, values, data), record
