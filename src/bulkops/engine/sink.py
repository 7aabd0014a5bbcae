"""Where finished rows go: the sink that records them (a ``ports.RowSink``).

The row and batch loops (``loops``) run rows and hand every outcome to a sink; they store
nothing themselves. In the process that holds a run, the sink is a ``RecordingSink``:
the recorder, the failure budget and the row-time metrics. In a row helper process it is
the helper's report (``helper_child``), whose progress messages the parent then hands
to its own ``RecordingSink``: the same loops run in both, only the sink differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from bulkops.observability.metrics import Metrics
from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState

if TYPE_CHECKING:
    from bulkops.engine.ports import FailureCount, RowBuffer


class RecordingSink:
    """The sink of the process that holds a run: rows go to its recorder, failures count
    against its failure budget (``budget``, once the run has one), times go to the
    operation's row-time metrics."""

    ordered = False

    def __init__(self, recorder: RowBuffer, metrics: Metrics, operation: str) -> None:
        self._recorder = recorder
        self._metrics = metrics
        self._operation = operation
        self.budget: FailureCount | None = None

    @property
    def halted(self) -> bool:
        """True once the failure budget is spent."""
        return self.budget is not None and self.budget.exceeded is not None

    def completed(self, first: int, last: int, at: datetime) -> None:
        """Buffer a span of plain completions."""
        self._recorder.add_span(first, last, at)

    def record(self, record: RowRecord) -> None:
        """Buffer a row's record and count a failure against the budget."""
        self._recorder.add(record)
        if record.state is RowState.FAILED and self.budget is not None:
            self.budget.note_failure()

    def timed(self, latencies: Sequence[int], seconds: float) -> None:
        """Add rows' times to the operation's row-time metrics."""
        self._metrics.rows_timed(self._operation, latencies, seconds)
