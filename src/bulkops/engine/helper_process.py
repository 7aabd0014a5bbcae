"""A row helper process: runs the rows of whole chunks for the process that started it.

The parent (``row_helpers.RowHelper``) owns everything stored: it claims the chunk, holds
its lease, records the rows this process reports and ends the chunk. This process only
reads the chunk's rows from the stored file, validates them and calls ``process_row``,
so that a second core does that work beside the parent's event loop and writer.

Started as ``python -m bulkops.engine.helper_process``; messages (``helper_messages``) come in
on stdin and go out on the original stdout, which is kept for them alone: anything the
operations print goes to stderr. The process ignores SIGINT (its parent decides when it
stops) and exits when its stdin closes, the parent's end of the pipe, even mid-job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from bisect import bisect_left
from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from pathlib import Path
from time import perf_counter
from typing import BinaryIO
from uuid import UUID

import pydantic

from bulkops.clock import CoarseClock, utcnow
from bulkops.definition.conversion import describe_errors
from bulkops.definition.operation import PROCESS_STEP
from bulkops.definition.registry import Registry, load_registry
from bulkops.definition.row_context import row_frame
from bulkops.engine.batches import BatchRunner, Pending
from bulkops.engine.chunks import read_chunk
from bulkops.engine.dry_run import DryRunner
from bulkops.engine.helper_messages import (
    Finished,
    Hello,
    Job,
    Progress,
    Ready,
    Run,
    Stop,
    receive,
    send,
)
from bulkops.engine.invoke import error_text
from bulkops.engine.resume import BATCH_SIZE  # rows between two looks at the messages
from bulkops.engine.rows import UNREADABLE, RowRunner
from bulkops.engine.run import OperationFailed, instantiate
from bulkops.errors import FileFormatError
from bulkops.formats import RawRow
from bulkops.observability.logs import configure, operation_scope
from bulkops.observability.metrics import ROW_BUCKETS
from bulkops.storage.records import RowRecord
from bulkops.storage.states import ErrorType, RowState

log = logging.getLogger("bulkops.engine")

REPORT_ROWS = 2_000  # a progress message once this many rows finished (and on time)


class _Report:
    """The rows finished since the last progress message. The row loop adds to it; it is
    sent when enough rows are in it, and on time by a timer too (the job's report
    interval, the parent's flush interval), so that a slow row never holds back the rows
    that finished before it."""

    def __init__(self, writer: asyncio.StreamWriter, job: int, upto: int) -> None:
        self._writer = writer
        self._job = job
        self.generation = 0  # taken (sent) so far: the row loop's cached lists are stale
        self.rows = 0
        self.progress = self._fresh(upto)

    def _fresh(self, upto: int) -> Progress:
        return Progress(job=self._job, upto=upto, latencies=[0] * (len(ROW_BUCKETS) + 1))

    def completed(self, number: int, at: datetime) -> None:
        """Row ``number`` completed at ``at`` (the loop of rows with ``validate_row``)."""
        runs = self.progress.runs
        if runs and runs[-1][1] + 1 == number and runs[-1][2] is at:
            runs[-1][1] = number
        else:
            runs.append([number, number, at])
        self.progress.upto = number
        self.rows += 1

    def failed(self, record: RowRecord, *, in_order: bool = True) -> None:
        """A row failed (``in_order``: every row before it is reported too)."""
        self.progress.failed.append(record)
        if in_order:
            self.progress.upto = record.row_number
        self.rows += 1

    def add_run(self, first: int, last: int, at: datetime) -> None:
        """Rows ``first`` to ``last`` completed at ``at`` (a batch's)."""
        self.progress.runs.append([first, last, at])
        self.rows += last - first + 1

    def took(self, seconds: float) -> None:
        """A row's processing time."""
        self.progress.latencies[bisect_left(ROW_BUCKETS, seconds)] += 1
        self.progress.seconds += seconds

    async def send(self) -> None:
        """Send what was added since the last progress, if anything."""
        if not self.rows:
            return
        progress, self.progress = self.progress, self._fresh(self.progress.upto)
        self.rows = 0
        self.generation += 1
        await send(self._writer, progress)

    async def pause(self) -> None:
        """Between rows: send what is due, and let a Stop (and the timer) in."""
        if self.rows >= REPORT_ROWS:
            await self.send()
        await asyncio.sleep(0)

    async def send_every(self, seconds: float) -> None:
        """Send progress every ``seconds`` (until cancelled)."""
        while True:
            await asyncio.sleep(seconds)
            await self.send()


async def run_job(registry: Registry, job: Job, writer: asyncio.StreamWriter) -> bool:
    """Run the job's rows and report them; always ends with one ``Finished`` (a stop
    cancels the row running, as it would in the parent). True when it ended clean (not
    stopped, no failure)."""
    operation_scope(job.operation_id)
    report = _Report(writer, job.id, job.chunk.first_row - 1)
    timer = asyncio.create_task(report.send_every(job.report_interval))
    failure: str | None = None
    stopped = False
    try:
        await _run_rows(registry, job, report)
    except asyncio.CancelledError:
        stopped = True  # what finished is reported below
    except (FileFormatError, OperationFailed) as exc:
        failure = str(exc)
    except Exception as exc:
        log.exception("Unexpected error in a row helper while running %s", job.operation_id)
        failure = f"Internal error: {error_text(exc)}"
    finally:
        timer.cancel()
    # A stop that comes now (the rows all ran) must not cut the last messages short.
    finished = Finished(job.id, failure, stopped)
    ending = asyncio.ensure_future(_finish(report, writer, finished))
    while not ending.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(ending)
    ending.result()
    return failure is None and not stopped


async def _finish(report: _Report, writer: asyncio.StreamWriter, finished: Finished) -> None:
    await report.send()
    await send(writer, finished)


async def _run_rows(registry: Registry, job: Job, report: _Report) -> None:
    definition = registry.get(job.operation)
    if definition is None:
        raise OperationFailed(f"Operation {job.operation!r} is not registered in the row helper")
    metadata, instance = await instantiate(definition, job.metadata)
    rows = read_chunk(
        Path(job.path),
        definition,
        job.chunk,
        job.file_format,
        job.column_map,
        job.sheet,
        job.fixes,
    )
    try:
        basics = (definition, instance, metadata, job.operation_id)
        if job.dry_run:
            dry = DryRunner(*basics, created_by=job.created_by)
            if dry.direct:
                await _run_direct(dry, rows, report)
            else:
                await _run_prepared(dry, rows, report)
            return
        if definition.is_batch:
            await _run_batches(BatchRunner(*basics, created_by=job.created_by), rows, report)
            return
        runner = RowRunner(*basics, created_by=job.created_by)
        if runner.direct:
            await _run_direct(runner, rows, report)
        else:
            await _run_prepared(runner, rows, report)
    finally:
        rows.close()


async def _run_batches(runner: BatchRunner, rows: Iterator[RawRow], report: _Report) -> None:
    """Rows of a batch operation: each converted (and validated), the valid ones processed
    in batches of its size, as ``Run._run_batches`` does one batch at a time. Reports stay
    in row order: a row that fails while earlier rows wait for their batch is held back
    until that batch is done, so a helper that dies never leaves a reported row behind an
    unreported one."""
    size = runner.definition.controls.batch_size or 1
    validated = runner.definition.overrides_validate_row
    pending: list[Pending] = []
    held: list[RowRecord] = []  # failed while ``pending`` waits: reported after it
    number, count = report.progress.upto, 0
    for raw in rows:
        count += 1
        if count >= BATCH_SIZE:
            count = 0
            await report.pause()
        number = raw.number
        prepared = await runner.prepare(raw) if validated else runner.convert(raw)
        if isinstance(prepared, RowRecord):
            if pending:
                held.append(prepared)
            else:
                report.failed(prepared)
            continue
        pending.append((raw, None, *prepared))
        if len(pending) >= size:
            await _run_batch(runner, pending, held, report, number)
            pending, held = [], []
    if pending:
        await _run_batch(runner, pending, held, report, number)


async def _run_batch(
    runner: BatchRunner,
    batch: list[Pending],
    held: list[RowRecord],
    report: _Report,
    upto: int,
) -> None:
    """Run a batch, then report it and the rows held back behind it: every row up to row
    ``upto``."""
    for record in await runner.run_batch(batch, report.add_run):
        report.failed(record, in_order=False)
    for record in held:
        report.failed(record, in_order=False)
    report.progress.upto = upto


async def _run_prepared(
    runner: RowRunner | DryRunner, rows: Iterator[RawRow], report: _Report
) -> None:
    """Rows of an operation with ``validate_row``: ``run_plain`` a batch at a time."""
    while batch := list(islice(rows, BATCH_SIZE)):
        start = 0
        while stopped := await runner.run_plain(batch, start, report.completed, report.took):
            index, record = stopped
            report.failed(record)
            start = index + 1
        await report.pause()


async def _run_direct(
    runner: RowRunner | DryRunner, rows: Iterator[RawRow], report: _Report
) -> None:
    """Rows with nothing to await but ``process_row`` (nothing at all in a dry run):
    ``run_plain``'s steps, with the bookkeeping of each completed row inline, so that a
    plain row costs no function call beyond its own. The lists of the report are cached
    between rows and looked up again whenever the report was sent meanwhile."""
    validate, metadata = runner.validate_model, runner.metadata
    process = runner.process if isinstance(runner, RowRunner) else None
    # A dry run's rows are only validated: current_row() tells validation's step.
    step, index = (PROCESS_STEP, 0) if process is not None else (None, -1)
    clock, first_bound, tick = perf_counter, ROW_BUCKETS[0], CoarseClock.TICK
    at, next_tick = utcnow(), clock() + tick
    generation = -1
    runs: list[Run] = []
    run: Run | None = None
    latencies: list[int] = []
    count = 0
    # current_row() as in run_plain; the job's own task holds the mark (no reset needed).
    scope, mark = runner.scope, row_frame.set
    for raw in rows:
        count += 1
        if count >= BATCH_SIZE:  # for every row, failed ones included
            count = 0
            await report.pause()
        mark((scope, raw.number, None, step, index, 1, 0))
        began = clock()
        values = raw.values
        if raw.error is not None or values is None:
            report.failed(runner.invalid(raw, ErrorType.VALIDATION, raw.error or UNREADABLE))
            report.took(clock() - began)
            continue
        try:
            row = validate(values)
        except pydantic.ValidationError as exc:
            report.failed(runner.invalid(raw, ErrorType.VALIDATION, describe_errors(exc)))
            report.took(clock() - began)
            continue
        if process is not None:
            try:
                await process(row, metadata)
            except Exception as exc:
                record = runner.new_record(raw, RowState.FAILED)
                record.error_type, record.error_message = ErrorType.PROCESSING, error_text(exc)
                report.failed(record)
                report.took(clock() - began)
                continue
        ended = clock()
        if report.generation != generation:  # sent meanwhile: start on its new lists
            generation, run = report.generation, None
            runs, latencies = report.progress.runs, report.progress.latencies
        if ended >= next_tick:
            at, next_tick = utcnow(), ended + tick
        number = raw.number
        if run is not None and run[2] is at and run[1] + 1 == number:
            run[1] = number
        else:
            run = [number, number, at]
            runs.append(run)
        seconds = ended - began
        if seconds < first_bound:
            latencies[0] += 1
        else:
            latencies[bisect_left(ROW_BUCKETS, seconds)] += 1
        progress = report.progress
        progress.seconds += seconds
        progress.upto = number
        report.rows += 1


async def _pipes(out: BinaryIO) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(out: BinaryIO) -> None:
    """Answer the parent until it closes the pipe."""
    reader, writer = await _pipes(out)
    hello = await receive(reader)
    if not isinstance(hello, Hello):
        raise SystemExit(f"row helper: expected a hello, got {type(hello).__name__}")
    sys.path[:] = hello.sys_path
    configure("json" if hello.log_format == "json" else "text", hello.log_level)
    try:
        registry = load_registry(hello.sources)
    except Exception as exc:
        await send(writer, Ready(error=error_text(exc)))
        return
    await send(writer, Ready())
    jobs = _Jobs(writer)

    async def listen() -> None:
        while True:
            try:
                message = await receive(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                os._exit(0)  # the parent is gone: nobody would record these rows
            if isinstance(message, Job):
                jobs.add(message)
            elif isinstance(message, Stop):
                for job_id in jobs.stop(message.job, withdraw=message.withdraw):
                    await send(writer, Finished(job_id, stopped=True))

    listener = asyncio.create_task(listen())
    try:
        while True:
            job = await jobs.next()
            if job is None:  # stopped before it began
                continue
            task = asyncio.create_task(run_job(registry, job, writer))
            jobs.started(job, task)
            clean = False
            try:
                clean = await task
            except asyncio.CancelledError:  # cancelled before its first line ran
                await send(writer, Finished(job.id, stopped=True))
            jobs.ended(job, clean)
    finally:
        listener.cancel()


class _Jobs:
    """The jobs received, run one after the other, and the stops that came for them."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._queue: asyncio.Queue[Job] = asyncio.Queue()
        self._queued: dict[int, Job] = {}  # received and not started
        # Told to stop: the one running, and queued ones (answered when told: they never
        # start, and are passed over when their turn comes).
        self._stopped: set[int] = set()
        self._current: tuple[Job, asyncio.Task[bool]] | None = None
        self._halted: set[UUID] = set()  # operations whose last job stopped or failed

    def add(self, job: Job) -> None:
        self._queued[job.id] = job
        self._queue.put_nowait(job)

    def stop(self, job_id: int, *, withdraw: bool = False) -> list[int]:
        """Stop a job (``withdraw``: only one that has not started); the jobs of its
        operation queued to follow it go with it. Returns the stopped jobs that had not
        started, to be answered (Finished, stopped) now: they never will, and their runs
        go on in the parent without waiting for the job running here."""
        current = self._current
        job = self._queued.get(job_id)
        if job is None and current is not None and current[0].id == job_id and not withdraw:
            job = current[0]
        if job is None:
            return []  # ended already, or running and only withdrawn: nothing to do
        operation = job.operation_id
        now = {job_id, *(q.id for q in self._queued.values() if q.operation_id == operation)}
        now -= self._stopped  # those stopped before were answered then
        self._stopped |= now
        if current is not None and current[0].id in now:
            current[1].cancel()
        return [n for n in now if n in self._queued]

    async def next(self) -> Job | None:
        """The next job, or None when its turn passed over it: stopped (and answered)
        already, or sent ahead behind a job of its operation that stopped or failed
        (answered now: Finished, stopped)."""
        job = await self._queue.get()
        del self._queued[job.id]
        if job.id in self._stopped:
            self._stopped.discard(job.id)
            self._halted.add(job.operation_id)
            return None
        if job.ahead and job.operation_id in self._halted:
            await send(self._writer, Finished(job.id, stopped=True))
            return None
        return job

    def started(self, job: Job, task: asyncio.Task[bool]) -> None:
        self._current = (job, task)

    def ended(self, job: Job, clean: bool) -> None:
        self._current = None
        self._stopped.discard(job.id)
        if clean:
            self._halted.discard(job.operation_id)
        else:
            self._halted.add(job.operation_id)


def main() -> None:
    """The helper's entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # print() in an operation must not write into the messages
    asyncio.run(serve(out))


if __name__ == "__main__":
    main()
