"""Running the valid rows of a batch operation through one ``process_batch`` call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from bulkops.definition.models import Row
from bulkops.definition.row_context import BATCH, row_frame
from bulkops.engine.invoke import direct_call, error_text
from bulkops.engine.rows import RowBasics
from bulkops.formats import RawRow
from bulkops.storage.records import RowRecord
from bulkops.storage.spans import stretches
from bulkops.storage.states import ErrorType, RowState

# A valid row waiting for its batch: the raw row, its stored record, the model and its id.
Pending = tuple[RawRow, RowRecord | None, Row, str | None]


class BatchRunner(RowBasics):
    """Validates rows one by one (``prepare``) and processes valid ones in batches."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._process = direct_call(getattr(self.instance, "process_batch"))  # noqa: B009

    async def run_batch(
        self,
        batch: Sequence[Pending],
        completed: Callable[[int, int, datetime], None] | None = None,
    ) -> list[RowRecord]:
        """Process a batch and return each row's record; never raises for row problems.

        An exception fails every row of the batch with its text; a returned list gives each
        row's failure message (None for success) and must be as long as the batch. With
        ``completed``, fresh rows that complete with nothing else to record (``plain``) go
        there as spans of consecutive row numbers (first, last) with the batch's completion
        time, instead of becoming records.
        """
        outcomes: list[str | None]
        await self.pace()  # outside the try: a storage fault is not the batch's failure
        token = row_frame.set(BATCH)  # current_row() says why there is no row
        try:
            result = await self._process([row for _, _, row, _ in batch], self.metadata)
        except Exception as exc:
            outcomes = [error_text(exc)] * len(batch)
        else:
            outcomes = self._outcomes(result, len(batch))
        finally:
            row_frame.reset(token)
        done = completed if self.plain else None
        at = self.clock.now()
        records = []
        numbers = []  # fresh rows completed with nothing else to record
        for (raw, existing, _, row_id), outcome in zip(batch, outcomes, strict=True):
            if done is not None and outcome is None and existing is None:
                numbers.append(raw.number)
            else:
                records.append(self._record(raw, existing, row_id, outcome))
        if done is not None and numbers:
            for first, last in stretches(numbers):
                done(first, last, at)
        return records

    @staticmethod
    def _outcomes(result: object, size: int) -> list[str | None]:
        if result is None:
            return [None] * size
        if not isinstance(result, list | tuple) or len(result) != size:
            count = len(result) if isinstance(result, list | tuple) else type(result).__name__
            message = f"process_batch returned {count} outcomes for {size} rows"
            return [message] * size
        return [None if item is None else str(item) for item in result]

    def _record(
        self, raw: RawRow, existing: RowRecord | None, row_id: str | None, failure: str | None
    ) -> RowRecord:
        if failure is None:
            record = self.new_record(raw, RowState.COMPLETED, row_id)
        else:
            record = self.new_record(raw, RowState.FAILED, row_id)
            record.error_type, record.error_message = ErrorType.PROCESSING, failure
        if existing is not None:
            record.retry_attempt = existing.retry_attempt
        return record
