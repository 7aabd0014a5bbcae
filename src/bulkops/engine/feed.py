"""Feeding a run's rows to its runner: the run's place in the process's row slots, and
which of four loops runs the rows (one at a time in turns of the slots, plain rows
together, a window of MaxRowConcurrency, or batches)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from time import perf_counter
from typing import Any

from bulkops.definition.models import Metadata
from bulkops.definition.operation import OperationBase
from bulkops.engine.batches import BatchRunner
from bulkops.engine.context import EngineContext
from bulkops.engine.dry_run import DryRunner
from bulkops.engine.fair_share import Claimant, SharedSlots, Turn, TurnSlots, tenant_of
from bulkops.engine.loops import PlainRunner, run_batches, run_plain
from bulkops.engine.pipeline import PipelineRunner
from bulkops.engine.recorder import RowRecorder
from bulkops.engine.resume import RowBatch
from bulkops.engine.rows import RowRunner
from bulkops.engine.sink import RecordingSink
from bulkops.engine.slots import Slots
from bulkops.engine.window import Window
from bulkops.formats import RawRow
from bulkops.storage.records import OperationRecord

# Rows run this long between two yields to the event loop: each yield puts the run behind
# every HTTP request that is ready, so yielding after every batch let busy readers starve
# processing; a few milliseconds keeps requests quick and the rows going.
SLICE_SECONDS = 0.005
# The runners of rows, one per kind of operation (``runners.runner_for`` picks one).
Runner = RowRunner | PipelineRunner | BatchRunner | DryRunner
# Rows travel in small batches (resume.BATCH_SIZE): one await per batch, not per row.
RowBatches = AsyncIterable[RowBatch]


class RowFeed:
    """One run's place in the process's row slots and the loop that feeds its rows to a
    runner, each outcome to the run's sink."""

    def __init__(
        self,
        context: EngineContext,
        record: OperationRecord,
        sink: RecordingSink,
        recorder: RowRecorder,
    ) -> None:
        self._context = context
        self._config = context.config
        self.record = record
        self._sink = sink
        self._recorder = recorder
        limit = self._config.max_row_concurrency
        self._slots = Slots(limit) if limit > 1 else None
        self._claimant: Claimant | None = None  # its place in the process's row slots
        self._turn: Turn | None = None  # its slot while it runs rows one at a time
        self.joined = asyncio.Event()  # it has its place in the process's row slots
        # Seconds its rows ran while it held its turn of the process's row slots (rows one
        # at a time): the pace of its rows, not of the other runs' turns between them.
        self.turn_seconds = 0.0

    def join(self, instance: OperationBase[Any, Any], metadata: Metadata, *, ahead: bool) -> None:
        """Take a place in the process's row slots: its rows take their slots from there
        (``ahead``: its rows wait for another run's, it is not counted yet)."""
        share = self._context.share
        if share is None or self._claimant is not None:
            return
        limit = self._config.max_row_concurrency
        tenant = tenant_of(self.record, instance, metadata)
        claimant = share.join(self.record.id, tenant, self.record.priority, limit, ahead=ahead)
        self._claimant = claimant
        self.joined.set()
        if limit > 1:
            self._slots = SharedSlots(limit, share, claimant)
        else:
            self._turn = Turn(share, claimant)

    def leave(self) -> None:
        """Give its place in the row slots up (the run ended)."""
        if self._claimant is not None and self._context.share is not None:
            if self._turn is not None:
                self._turn.release()
            self._context.share.leave(self._claimant)

    def pass_turn(self) -> None:
        """Give up its slot while it runs no rows (it runs rows one at a time)."""
        if self._turn is not None:
            self._turn.release()

    def pacing_slots(self) -> Slots | None:
        """The slots a row waiting for a rate-limit permit gives up meanwhile."""
        return self._slots or (TurnSlots(self._turn) if self._turn is not None else None)

    async def feed(self, rows: RowBatches, runner: Runner) -> None:
        """Run ``rows`` with ``runner``, recording each outcome: batches in a window; one
        at a time without room for more (or a direct dry run); else in a window."""
        if isinstance(runner, BatchRunner):
            await self._run_batches(rows, runner)
        elif self._slots is None or (isinstance(runner, DryRunner) and runner.direct):
            await self._run_sequential(rows, runner)
        else:
            await self._run_window(rows, runner)

    async def _run_sequential(self, rows: RowBatches, runner: PlainRunner | PipelineRunner) -> None:
        sink, recorder, turn = self._sink, self._recorder, self._turn
        fresh = runner if isinstance(runner, RowRunner | DryRunner) and runner.plain else None
        took, clock = self._context.metrics.row_timer(self.record.operation_name), perf_counter
        resume_by = clock() + SLICE_SECONDS
        async for batch in rows:
            plain: list[RawRow] = []  # fresh rows of a plain operation, run together
            for raw, existing in batch:
                if fresh is not None and existing is None:
                    plain.append(raw)
                    continue
                if fresh is not None and plain and await self._run_plain(fresh, plain):
                    return
                plain = []
                if turn is not None:
                    await turn.hold()
                started = clock()
                sink.record(await runner.run(raw, existing))
                took(elapsed := clock() - started)
                self.turn_seconds += elapsed
                if turn is not None and turn.ran(1, elapsed):
                    await turn.pass_on()
                if sink.halted:
                    return  # no further row starts
            if fresh is not None and plain and await self._run_plain(fresh, plain):
                return
            if recorder.full:
                if turn is not None:
                    turn.release()  # nobody's rows wait for this one's writes
                await recorder.wait_room()
            if clock() >= resume_by:  # let HTTP requests and other operations in
                await asyncio.sleep(0)
                resume_by = clock() + SLICE_SECONDS

    async def _run_plain(self, fresh: PlainRunner, raws: list[RawRow]) -> bool:
        """Run fresh rows of a plain operation (``loops.run_plain``) in turns of the
        process's row slots (as many rows a turn as fit in ``fair_share.QUANTUM`` at their
        pace: the whole batch when they are fast); True when the failure budget is spent."""
        turn, sink = self._turn, self._sink
        if turn is None:
            return await run_plain(fresh, raws, sink)
        start, clock = 0, perf_counter
        while start < len(raws):
            await turn.hold()
            end = min(len(raws), start + turn.rows_per_turn)
            part = raws if start == 0 and end == len(raws) else raws[start:end]
            began = clock()
            if await run_plain(fresh, part, sink):
                return True
            elapsed = clock() - began
            self.turn_seconds += elapsed
            if turn.ran(end - start, elapsed):
                await turn.pass_on()
            start = end
        return False

    async def _run_window(self, rows: RowBatches, runner: PlainRunner | PipelineRunner) -> None:
        window = Window(
            self._config.max_row_concurrency,
            self._slots,
            self._sink,
            self._recorder,
            timer=self._context.metrics.row_timer(self.record.operation_name),
        )
        try:
            async for batch in rows:
                for raw, existing in batch:
                    if self._sink.halted:
                        break
                    await window.launch(runner.run(raw, existing))
                if self._sink.halted:
                    break
            await window.finish()
        finally:
            await window.cancel()

    async def _run_batches(self, rows: RowBatches, runner: BatchRunner) -> None:
        slots = self._slots
        if slots is None and self._claimant is not None and self._context.share is not None:
            slots = SharedSlots(1, self._context.share, self._claimant)
        sink = self._sink
        window = Window(self._config.max_row_concurrency, slots, sink, self._recorder)
        try:
            await run_batches(runner, rows, sink, window.launch)
            await window.finish()
        finally:
            await window.cancel()
