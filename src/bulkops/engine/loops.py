"""The row loop and the batch loop: rows run in order, their outcomes handed to a sink.

These are the only loops that run fresh rows one after the other: the process that holds
a run calls them with its ``RecordingSink``, a row helper process with its report (see
``sink``). Rows that run at once within MaxRowConcurrency, and rows of pipelines, go
through ``Window`` in ``run`` instead.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import AsyncIterable, Awaitable, Callable, Coroutine, Iterable
from datetime import datetime
from time import perf_counter
from typing import Any

import pydantic

from bulkops.clock import CoarseClock
from bulkops.definition.conversion import describe_errors
from bulkops.definition.models import Row
from bulkops.definition.operation import PROCESS_STEP
from bulkops.definition.row_context import row_frame
from bulkops.engine.batches import BatchRunner, Pending
from bulkops.engine.dry_run import DryRunner
from bulkops.engine.invoke import error_text
from bulkops.engine.ports import RowSink
from bulkops.engine.rows import UNREADABLE, RowRunner
from bulkops.formats import RawRow
from bulkops.observability.metrics import ROW_BUCKETS
from bulkops.storage.records import RowRecord
from bulkops.storage.spans import stretches
from bulkops.storage.states import ErrorType, RowState

PlainRunner = RowRunner | DryRunner  # runners whose fresh rows may run in ``run_plain``
# Starts a batch's work; the records it returns reach the sink by the launcher's hand.
Launch = Callable[[Coroutine[Any, Any, list[RowRecord]]], Awaitable[None]]
# Rows read for the batch loop, each with its stored record (None: never run before).
Rows = Iterable[tuple[RawRow, RowRecord | None]]


async def run_plain(runner: PlainRunner, raws: Iterable[RawRow], sink: RowSink) -> bool:
    """Run fresh rows of a plain operation (``runner.plain``: a completed row leaves
    nothing but its number and time), in order, each to its end before the next starts.
    Completed rows go to ``sink.completed`` as spans, a row that fails to ``sink.record``,
    and their times to ``sink.timed`` when the loop ends. Returns True when the sink
    halted after a failure: no further row started.

    A row with nothing to await but its ``process_row`` (no ``validate_row``, no rate
    limit; in a dry run nothing at all) runs without any other coroutine, and a completed
    one costs a list append: this is the hot path of a plain import. The rows completed
    within one tick of the clock are handed on together (one span as a rule); those
    completed before a row that waits (the loop yields), or before the loop was
    cancelled, are handed on at once.
    """
    process = runner.process  # None in a dry run: rows are only validated
    metadata, validate, direct = runner.metadata, runner.validate_model, runner.direct
    # current_row(): a tuple marked per row (before anything of the row runs, so no code
    # of a row sees the row before it); the context is built only when asked. A dry run's
    # rows are at the validation step.
    scope, mark = runner.scope, row_frame.set
    step, index = (PROCESS_STEP, 0) if process is not None else (None, -1)
    clock, now, tick, bound = perf_counter, runner.clock.now, CoarseClock.TICK, ROW_BUCKETS[0]
    latencies = [0] * (len(ROW_BUCKETS) + 1)
    quick, seconds = 0, 0.0  # rows below the first bucket's bound; every row's time
    done = _Done(sink, now())
    keep, next_tick = done.numbers.append, clock() + tick
    call_soon = asyncio.get_running_loop().call_soon
    halted = False
    token = mark(None)
    try:
        for raw in raws:
            if not done.armed:
                done.armed = True
                call_soon(done.hand)
            began = clock()
            mark((scope, raw.number, None, step, index, 1, 0))
            failure: RowRecord | None = None
            values = raw.values
            if not direct:
                row, failure = await _checked(runner, raw)
            elif raw.error is not None or values is None:
                failure = runner.invalid(raw, ErrorType.VALIDATION, raw.error or UNREADABLE)
            else:
                try:
                    row = validate(values)
                except pydantic.ValidationError as exc:
                    failure = runner.invalid(raw, ErrorType.VALIDATION, describe_errors(exc))
            if failure is None and process is not None:
                try:
                    await process(row, metadata)
                except Exception as exc:
                    failure = runner.new_record(raw, RowState.FAILED)
                    failure.error_type = ErrorType.PROCESSING
                    failure.error_message = error_text(exc)
            ended = clock()
            took = ended - began
            seconds += took
            if took < bound:
                quick += 1
            else:
                latencies[bisect_left(ROW_BUCKETS, took)] += 1
            if failure is None:
                if ended >= next_tick:
                    done.hand()
                    done.at, next_tick = now(), ended + tick
                keep(raw.number)
                continue
            done.hand()
            sink.record(failure)
            if sink.halted:
                halted = True
                break
    finally:
        row_frame.reset(token)
        done.hand()
        latencies[0] += quick
        sink.timed(latencies, seconds)
    return halted


class _Done:
    """The rows ``run_plain`` completed at ``at`` and has not handed on yet. They go on at
    each tick, before a failure, at the end, and whenever the loop yields while they wait
    (``armed``: called soon, which is when a row waits for something): rows completed
    before a slow row must not wait for it to end."""

    __slots__ = ("armed", "at", "numbers", "sink")

    def __init__(self, sink: RowSink, at: datetime) -> None:
        self.sink = sink
        self.at = at
        self.numbers: list[int] = []
        self.armed = False

    def hand(self) -> None:
        """Hand the rows on, as spans, and forget them."""
        self.armed = False
        numbers = self.numbers
        if numbers:
            for first, last in stretches(numbers):
                self.sink.completed(first, last, self.at)
            numbers.clear()


async def _checked(runner: PlainRunner, raw: RawRow) -> tuple[Row, None] | tuple[None, RowRecord]:
    """A row's ``checked`` (``validate_row``, a rate-limit wait) as a row or a failure."""
    checked = await runner.checked(raw)
    if isinstance(checked, RowRecord):
        return None, checked
    return checked, None


async def run_batches(
    runner: BatchRunner,
    rows: AsyncIterable[Rows],
    sink: RowSink,
    launch: Launch | None = None,
) -> None:
    """Convert (and validate) rows in order and process the valid ones in batches of the
    operation's size. Each full batch (and the last one) is started with ``launch``, whose
    caller hands the records it returns to the sink (a window running several at once);
    without it, each batch runs to its end here and its records go to ``sink.record``.
    Fresh rows that complete plainly go to ``sink.completed`` as spans, rows that fail
    before their batch to ``sink.record``. No row starts once the sink halted.

    For an ``ordered`` sink (which needs ``launch`` None) a row that fails while earlier
    rows wait for their batch is handed on after that batch ran, so that every outcome
    comes after those of the rows before it.
    """
    size = runner.definition.controls.batch_size or 1
    # Without validate_row nothing is awaited before a row joins its batch.
    convert = None if runner.definition.overrides_validate_row else runner.convert
    ordered = sink.ordered
    pending: list[Pending] = []
    held: list[RowRecord] = []  # failed while ``pending`` waits (for an ordered sink)
    async for rows_read in rows:
        for raw, existing in rows_read:
            if sink.halted:
                break
            if convert is not None:
                prepared = convert(raw, existing)
            else:
                prepared = await runner.prepare(raw, existing)
            if isinstance(prepared, RowRecord):
                if ordered and pending:
                    held.append(prepared)
                else:
                    sink.record(prepared)
                continue
            pending.append((raw, existing, *prepared))
            if len(pending) >= size:
                await _start(runner, pending, held, sink, launch)
                pending, held = [], []
        if sink.halted:
            break
    if pending and not sink.halted:
        await _start(runner, pending, held, sink, launch)
    else:
        for record in held:
            sink.record(record)


async def _start(
    runner: BatchRunner,
    batch: list[Pending],
    behind: list[RowRecord],
    sink: RowSink,
    launch: Launch | None,
) -> None:
    """Start ``batch`` (see ``run_batches``), then hand on the rows held ``behind`` it."""
    work = runner.run_batch(batch, sink.completed)
    if launch is not None:
        await launch(work)
    else:
        for record in await work:
            sink.record(record)
    for record in behind:
        sink.record(record)
