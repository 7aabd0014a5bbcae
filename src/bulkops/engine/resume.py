"""Skipping rows that already reached a final state when an operation is picked up again."""

from __future__ import annotations

from collections import deque
from uuid import UUID

from bulkops.storage.ports import RowStore

_BATCH = 10_000


class FinishedRows:
    """Answers "is row N already final?" for ascending N, reading stored row numbers in
    batches, so resuming a million-row operation never loads them all at once."""

    def __init__(self, rows: RowStore, operation_id: UUID) -> None:
        self._rows = rows
        self._operation_id = operation_id
        self._buffer: deque[int] = deque()
        self._last = 0
        self._exhausted = False

    @classmethod
    async def load(cls, rows: RowStore, operation_id: UUID) -> FinishedRows | None:
        """A cursor when some rows are already final, else None (nothing to skip)."""
        cursor = cls(rows, operation_id)
        await cursor._fill()
        return None if cursor._exhausted and not cursor._buffer else cursor

    async def _fill(self) -> None:
        numbers = await self._rows.final_row_numbers(self._operation_id, self._last, _BATCH)
        self._buffer.extend(numbers)
        if numbers:
            self._last = numbers[-1]
        if len(numbers) < _BATCH:
            self._exhausted = True

    async def contains(self, row_number: int) -> bool:
        """True when ``row_number`` is final. Call with ascending row numbers."""
        while True:
            while self._buffer and self._buffer[0] < row_number:
                self._buffer.popleft()
            if self._buffer or self._exhausted:
                return bool(self._buffer) and self._buffer[0] == row_number
            await self._fill()
