"""How an operation is cut into chunks: by time, at the pace of its first rows.

Every operation is run the same way, whatever its size. The worker that claims it runs its
first rows (``Probe``): for ``PROBE_SECONDS``, and never more than a chunk may hold
(``BULKOPS_CHUNK_ROWS``). Those rows are the operation's first chunk. When the rest would
keep that worker busy longer than ``SPREAD_SECONDS`` at their pace, or is more than one
chunk may hold, the rest is split into chunks of about ``CHUNK_SECONDS`` each (a ``grain``
of rows at least, ``BULKOPS_CHUNK_ROWS`` at most) that every worker can claim; otherwise the
worker runs the rest itself. So a slow operation spreads over every worker without any
tuning, and a fast one is cut into chunks as large as a chunk may be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import pairwise
from time import perf_counter

from bulkops.engine.resume import RowBatch
from bulkops.formats import ChunkStart

PROBE_SECONDS = 0.25  # the first rows that measure the pace
SPREAD_SECONDS = 2.0  # more work than this left, at that pace: split the rest
CHUNK_SECONDS = 0.5  # the time a chunk is cut to take, at that pace
GRAIN = 50  # rows: where a chunk may begin (the file is indexed every GRAIN rows)
# The last TAPER chunks' worth of rows cut at the pace of slow rows are cut TAPER times
# smaller: the workers end together, none left running a whole chunk while the others idle.
TAPER = 4


def grain(chunk_rows: int) -> int:
    """Rows between two places where a chunk may begin: ``GRAIN``, or fewer when a chunk
    may hold fewer (``chunk_rows`` > 0)."""
    return min(GRAIN, chunk_rows)


@dataclass(frozen=True, slots=True)
class Cut:
    """One chunk of the rest of an operation: its first row, row count and byte offset."""

    first_row: int
    row_count: int
    offset: int


def cut(starts: tuple[ChunkStart, ...], first_row: int, total: int, rows: int) -> list[Cut]:
    """Chunks of about ``rows`` rows covering rows ``first_row``..``total``, each beginning
    at one of ``starts`` (``first_row`` must be one of them)."""
    usable = [start for start in starts if first_row <= start.first_row <= total]
    cuts: list[Cut] = []
    for start in usable:
        if cuts and start.first_row - cuts[-1].first_row < rows:
            continue
        cuts.append(Cut(start.first_row, 0, start.offset))
    ends = [c.first_row for c in cuts[1:]] + [total + 1]
    return [
        Cut(c.first_row, end - c.first_row, c.offset) for c, end in zip(cuts, ends, strict=True)
    ]


def plan(
    starts: tuple[ChunkStart, ...], first_row: int, total: int, rows: int, chunk_rows: int
) -> list[Cut]:
    """The chunks of rows ``first_row``..``total`` for chunks of ``rows`` rows (see
    ``chunk_size``): of that size, but for the last ``TAPER`` of them, cut ``TAPER`` times
    smaller, when ``rows`` was sized at the pace of slow rows (below ``chunk_rows``)."""
    if rows >= chunk_rows:
        return cut(starts, first_row, total, rows)
    smaller = max(grain(chunk_rows), rows // TAPER)
    taper_from = total + 1 - TAPER * rows
    later = [start for start in starts if start.first_row >= max(first_row, taper_from)]
    if not later or later[0].first_row <= first_row:
        return cut(starts, first_row, total, smaller)
    middle = later[0].first_row
    return cut(starts, first_row, middle - 1, rows) + cut(starts, middle, total, smaller)


def chunk_size(seconds_per_row: float, chunk_rows: int) -> int:
    """Rows a chunk gets at that pace: ``CHUNK_SECONDS`` of them, a whole number of grains
    within one grain..``chunk_rows`` (so that ``cut`` never makes one larger)."""
    step = grain(chunk_rows)
    rows = chunk_rows if seconds_per_row <= 0 else int(CHUNK_SECONDS / seconds_per_row)
    return max(step, min(chunk_rows, rows) // step * step)


def fast(row_count: int, chunk_rows: int) -> bool:
    """Whether a chunk of ``row_count`` rows was cut for fast rows: at least half as large as
    a chunk may be (``CHUNK_SECONDS`` of its operation's first rows filled that many)."""
    return row_count * 2 >= chunk_rows


class Probe:
    """The first rows of an operation, ending at a row where a chunk may begin, and the
    pace they ran at (wall time a row at the run's concurrency, or the time a row took in
    its turns when rows run one at a time). They end once
    ``PROBE_SECONDS`` have passed, or at the last boundary within ``limit`` rows (0: no
    limit; boundaries are ``step`` rows apart)."""

    def __init__(
        self,
        batches: AsyncIterator[RowBatch],
        boundaries: set[int],
        limit: int = 0,
        step: int = GRAIN,
    ) -> None:
        self._batches = batches
        self._boundaries = boundaries
        self._limit = limit
        self._step = step
        self._left: RowBatch = []
        self._started = 0.0
        self.rows = 0  # rows handed out
        self.next_row = 0  # the first row not handed out (0: the file ended)
        self.seconds = 0.0

    @property
    def seconds_per_row(self) -> float:
        """The pace of the first rows."""
        return self.seconds / self.rows if self.rows else 0.0

    async def first(self) -> AsyncIterator[RowBatch]:
        """Batches until the probe time or row limit is reached, cut at a boundary. A batch
        is handed out a piece at a time, from boundary to boundary, so that the probe ends
        at the first boundary after its time, not at the end of a batch of slow rows."""
        self._started = perf_counter()
        async for batch in self._batches:
            starts = [i for i, (raw, _) in enumerate(batch) if raw.number in self._boundaries]
            cuts = [0, *(i for i in starts if i > 0), len(batch)]
            for begin, end in pairwise(cuts):
                if begin in starts and self._over():
                    self._left = batch[begin:]
                    self.next_row = batch[begin][0].number
                    return
                self.rows += end - begin
                yield batch if end - begin == len(batch) else batch[begin:end]

    def ended(self, turn_seconds: float = 0.0) -> None:
        """The first rows ran (every one of them finished): the pace is known. Rows run one
        at a time in turns of the process's row slots give ``turn_seconds``, the time they
        ran in their turns: beside other operations the wall clock counts the others' turns
        too, and would make the rest look slow enough to cut into many small chunks."""
        wall = perf_counter() - self._started
        self.seconds = min(wall, turn_seconds) if turn_seconds > 0 else wall

    async def rest(self) -> AsyncIterator[RowBatch]:
        """The batches after the first ones, for a run that goes on with them itself."""
        if self._left:
            yield self._left
            self._left = []
        async for batch in self._batches:
            yield batch

    def _over(self) -> bool:
        """Whether the probe ends at this boundary: its time is up, or the rows up to the
        next one would be more than ``limit``."""
        if self._limit and self.rows + self._step > self._limit:
            return True
        return perf_counter() - self._started >= PROBE_SECONDS
