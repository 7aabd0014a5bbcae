"""The ports the engine's modules meet at: small shared protocols, so that a module depends
on what it uses rather than on the module that provides it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import ParamSpec, Protocol, TypeVar

from bulkops.definition.controls import RateLimit
from bulkops.storage.records import RowRecord
from bulkops.storage.states import OperationStatus

P = ParamSpec("P")
T = TypeVar("T")


class StorageCalls(Protocol):
    """Storage calls that ride out an outage (``persistence.StorageRetry``)."""

    async def call(self, method: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await method(*args, **kwargs)``, tried again while storage is unavailable."""
        ...


class InTurn(Protocol):
    """A chunk run in turn, as its run tells how far it got (the dispatcher's turn)."""

    def nearly_done(self) -> bool:
        """The second half of the chunk's rows is being read: another chunk of its
        operation may be claimed now; True when a turn to claim one began."""


class HeldSlots(Protocol):
    """The process's row slots as its writer sees them (``fair_share.FairShare``)."""

    @property
    def held(self) -> int:
        """Rows (or batches) holding a slot right now: running."""
        ...


class Pacing(Protocol):
    """What a row awaits right before a rate-limited call (``pacing.Pacer``)."""

    async def before(self, key: str, rate: RateLimit) -> None:
        """Return once a call under ``key`` may start (and count it as started)."""


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


class StoredFor(Protocol):
    """What a run's buffer tells the run it stores rows for, at each write
    (``run.Run``)."""

    def lost(self, status: OperationStatus | None) -> None:
        """The operation's stored status after a write (None: the record vanished, or this
        worker no longer holds it): the run stops unless it still holds it."""

    def unstored(self, error: BaseException) -> None:
        """Its rows could not be stored (storage stayed unreachable, or refused them)."""


class RowBuffer(Protocol):
    """Where a run's finished rows wait to be stored (``recorder.RowRecorder``)."""

    def add(self, record: RowRecord) -> None:
        """Buffer a finished row's record."""

    def add_span(self, first: int, last: int, at: datetime) -> None:
        """Buffer rows ``first`` to ``last``, completed at ``at`` with nothing else to keep."""


class FailureCount(Protocol):
    """A run's failure budget as its sink and the run see it (``window.FailureBudget``)."""

    exceeded: str | None  # what was passed, once more rows failed than tolerated

    def note_failure(self) -> None:
        """One more row failed here."""

    def observe(self, stored_failed: int, flushed_here: int) -> None:
        """The operation's stored failures, of which ``flushed_here`` came from this run."""
