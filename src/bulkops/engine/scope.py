"""The port between a run and its scope: what a scope sees of the run it belongs to, and
how a run ends.

A run of a whole operation and a run of a chunk are the same class (``run.Run``); what
differs is its ``Scope``: which rows it reads, whether it cuts the rest into chunks, and how
it concludes (``whole.WholeOperation``: the claimer's, from the first row;
``chunks.ChunkRange``: a claimed chunk's range, maybe in a row helper). A scope drives its
run through ``ScopedRun``, so neither module needs the other's.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.context import EngineContext
from bulkops.engine.recorder import RowRecorder
from bulkops.engine.resume import RowBatch
from bulkops.engine.sink import RecordingSink
from bulkops.storage.records import OperationRecord
from bulkops.storage.states import OperationStatus


class StopReason(enum.Enum):
    """Why a run stopped before its last row."""

    CANCELLED = "cancelled"  # a user cancelled the operation
    LOST = "lost"  # someone else moved it on (stuck sweeper, recovery, a resuming worker)
    SHUTDOWN = "shutdown"  # this process is stopping and could not drain in time
    STORAGE = "storage"  # storage stayed unreachable: left to be resumed


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended: why it stopped early (None: it read every row) and the failure of
    the operation as a whole, if any."""

    stop_reason: StopReason | None
    failure: str | None


S_co = TypeVar("S_co", covariant=True)


class ScopedRun(Protocol[S_co]):
    """A run as its scope drives it (``run.Run``): it prepares the operation's runner,
    feeds it rows, and records their outcomes."""

    stop_reason: StopReason | None  # set once it stops before its last row

    @property
    def scope(self) -> S_co:
        """What it covers and how it ends."""

    @property
    def record(self) -> OperationRecord:
        """The operation as claimed."""

    @property
    def context(self) -> EngineContext:
        """The engine's shared parts in this process."""

    @property
    def sink(self) -> RecordingSink:
        """Where its rows' outcomes go, whatever runs them."""

    @property
    def recorder(self) -> RowRecorder:
        """Its rows' buffer on their way to storage."""

    @property
    def turn_seconds(self) -> float:
        """Seconds its rows ran in their turns of the process's row slots."""

    def definition(self) -> OperationDefinition:
        """The operation's definition in this process's registry."""

    async def prepare(self, definition: OperationDefinition, total: int) -> None:
        """Build the operation and the runner of its rows; take its place in the row
        slots. Once, before ``feed``."""

    async def feed(self, rows: AsyncIterable[RowBatch]) -> None:
        """Run ``rows``, recording each outcome."""

    def pass_turn(self) -> None:
        """Give up its slot while it runs no rows."""

    def lost(self, status: OperationStatus | None) -> None:
        """Stop unless ``status`` (the stored status) is one it holds."""


class Scope(Protocol):
    """What a run covers and how it ends: the difference between the run of a whole
    operation and the run of a chunk."""

    @property
    def chunk(self) -> int | None:
        """The index of the chunk it holds (None: the whole operation)."""

    @property
    def waiting(self) -> bool:
        """Set up ahead of its rows, which wait for another run's (a chunk claimed ahead)."""

    async def process(self, run: ScopedRun[Any]) -> None:
        """Read its rows and feed them to the run (``ScopedRun.feed``)."""

    async def conclude(self, run: ScopedRun[Any], ending: Ending) -> None:
        """Record the end of what it held, once its rows are recorded."""
