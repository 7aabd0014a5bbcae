"""Running one data row of a dry run: convert and validate, nothing else.

A dry run never calls ``process_row``, ``process_batch`` or a step, whatever the kind of
the operation. A row that passes is Completed at the step ``validation`` (step index -1,
the index of a row that failed there), so the counters read as for any run: processed
rows are the rows validated, successful ones those that passed, errors those that failed.
"""

from __future__ import annotations

from typing import Any

from bulkops.definition.models import Row
from bulkops.definition.operation import VALIDATION_STEP
from bulkops.engine.rows import RowBasics
from bulkops.formats import RawRow
from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState

DRY_RUN_STEP = VALIDATION_STEP  # where a row a dry run validated stops
DRY_RUN_STEP_INDEX = -1


class DryRunner(RowBasics):
    """Validates rows (row model and ``validate_row``) and records the outcome."""

    process = None  # what a row runs after its validation: nothing

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

    async def checked(self, raw: RawRow) -> Row | RowRecord:
        """A fresh row validated (``validate_row`` included), or its failed record."""
        prepared = await self.prepare(raw)
        return prepared if isinstance(prepared, RowRecord) else prepared[0]
