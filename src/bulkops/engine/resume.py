"""Finding stored row records when an operation is picked up again, in row order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import UUID

from bulkops.storage.ports import RowStore
from bulkops.storage.records import RowRecord

_BATCH = 5_000


class StoredRows:
    """Answers "what is stored for row N?" for ascending N by walking the stored records in
    keyset batches, so resuming a million-row operation never loads them all at once.

    Final rows are skipped by the caller; unfinished ones (a row waiting for a signal when
    its worker stopped) resume from their stored progress.
    """

    def __init__(self, records: AsyncIterator[RowRecord], first: RowRecord) -> None:
        self._records = records
        self._current: RowRecord | None = first

    @classmethod
    async def load(cls, rows: RowStore, operation_id: UUID) -> StoredRows | None:
        """A cursor when the operation has stored rows, else None (a fresh start)."""
        records = rows.iterate(operation_id, batch_size=_BATCH)
        first = await anext(records, None)
        return None if first is None else cls(records, first)

    async def find(self, row_number: int) -> RowRecord | None:
        """The stored record of ``row_number``, or None. Call with ascending numbers."""
        while self._current is not None and self._current.row_number < row_number:
            self._current = await anext(self._records, None)
        if self._current is not None and self._current.row_number == row_number:
            return self._current
        return None
