"""Running one data row of a dry run: convert and validate, nothing else.

A dry run never calls ``process_row``, ``process_batch`` or a step, whatever the kind of
the operation. A row that passes is Completed at the step ``validation`` (step index -1,
the index of a row that failed there), so the counters read as for any run: processed
rows are the rows validated, successful ones those that passed, errors those that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from time import perf_counter
from typing import Any

import pydantic

from bulkops.definition.conversion import describe_errors
from bulkops.definition.operation import VALIDATION_STEP
from bulkops.engine.rows import UNREADABLE, RowBasics
from bulkops.formats import RawRow
from bulkops.storage.records import RowRecord
from bulkops.storage.states import ErrorType, RowState

DRY_RUN_STEP = VALIDATION_STEP  # where a row a dry run validated stops
DRY_RUN_STEP_INDEX = -1


class DryRunner(RowBasics):
    """Validates rows (row model and ``validate_row``) and records the outcome."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Nothing to await for a row: no validate_row.
        self.direct = not self.definition.overrides_validate_row

    @property
    def plain(self) -> bool:
        """Whether a row that passes leaves nothing to record but its number and time: its
        data is not kept (only failed rows are fixed and retried), so only a business key
        makes a record of it."""
        return not self.definition.overrides_row_id

    def passed(self, raw: RawRow, row_id: str | None, existing: RowRecord | None) -> RowRecord:
        """The record of a row that passed validation (with its data when the operation
        keeps it, as a processed row's)."""
        record = self.new_record(raw, RowState.COMPLETED, row_id)
        record.step_index, record.step_name = DRY_RUN_STEP_INDEX, DRY_RUN_STEP
        if existing is not None:
            record.retry_attempt = existing.retry_attempt
        return record

    async def run(self, raw: RawRow, existing: RowRecord | None = None) -> RowRecord:
        """Validate one raw row; never raises for row-level problems."""
        prepared = await self.prepare(raw, existing)
        if isinstance(prepared, RowRecord):
            return prepared
        return self.passed(raw, prepared[1], existing)

    async def run_plain(
        self,
        raws: Sequence[RawRow],
        start: int,
        completed: Callable[[int, datetime], None],
        took: Callable[[float], None],
    ) -> tuple[int, RowRecord] | None:
        """``RowRunner.run_plain`` without the processing: each row that passes goes to
        ``completed``; stops at the first row that fails and returns its index and record."""
        clock, now = perf_counter, self._clock.now
        validate, direct = self.validate_model, self.direct
        for index in range(start, len(raws)):
            began = clock()
            raw = raws[index]
            failed: RowRecord | None = None
            if not direct:
                prepared = await self.prepare(raw)
                if isinstance(prepared, RowRecord):
                    failed = prepared
            elif raw.error is not None or raw.values is None:
                failed = self.invalid(raw, ErrorType.VALIDATION, raw.error or UNREADABLE)
            else:
                try:
                    validate(raw.values)
                except pydantic.ValidationError as exc:
                    failed = self.invalid(raw, ErrorType.VALIDATION, describe_errors(exc))
            took(clock() - began)
            if failed is not None:
                return index, failed
            completed(raw.number, now())
        return None
