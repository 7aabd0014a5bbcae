"""Where finished rows go: the ``RowSink`` port, and the sink that records them.

The row and batch loops (``loops``) run rows and hand every outcome to a sink; they store
nothing themselves. In the process that holds a run, the sink is a ``RecordingSink``:
the recorder, the failure budget and the row-time metrics. In a row helper process it is
the helper's report (``helper.process``), whose progress messages the parent then hands
to its own ``RecordingSink``: the same loops run in both, only the sink differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from bulkops.engine.recorder import RowRecorder
from bulkops.engine.window import FailureBudget
from bulkops.observability.metrics import Metrics
from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState


class RowSink(Protocol):
    """What the loops hand on, as rows finish."""

    @property
    def halted(self) -> bool:
        """True once no further row may start (the failure budget is spent)."""
        ...

    @property
    def ordered(self) -> bool:
        """True when outcomes must arrive in row order, none before a row read earlier
        (a helper's reports: the parent resumes after the last row reported). A loop then
        holds back a row that fails while earlier rows wait for their batch."""
        ...

    def completed(self, first: int, last: int, at: datetime) -> None:
        """Rows ``first`` to ``last`` (a span, see ``storage.spans``) completed at ``at``
        with nothing to record but their numbers and that time."""

    def record(self, record: RowRecord) -> None:
        """A row that leaves a record: one that failed, or one with more to keep than its
        number (its data, its business key, an earlier attempt)."""

    def timed(self, latencies: Sequence[int], seconds: float) -> None:
        """How long rows took: a count per bucket of ``metrics.ROW_BUCKETS`` (and one
        above them), and their seconds in all."""


class RecordingSink:
    """The sink of the process that holds a run: rows go to its recorder, failures count
    against its failure budget (``budget``, once the run has one), times go to the
    operation's row-time metrics."""

    ordered = False

    def __init__(self, recorder: RowRecorder, metrics: Metrics, operation: str) -> None:
        self._recorder = recorder
        self._metrics = metrics
        self._operation = operation
        self.budget: FailureBudget | None = None

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
