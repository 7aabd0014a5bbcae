"""A row helper process: runs the rows of whole chunks for the process that started it.

The parent (``helper.pool.RowHelper``) owns everything stored: it claims the chunk, holds its
lease, records the rows this process reports and ends the chunk. This process only reads
the chunk's rows from the stored file and runs them through the same loops as the parent
(``engine.loops``), with a sink of its own, ``Report``, that turns their outcomes into
progress messages: a second core does that work beside the parent's event loop and
writer.

Started as ``python -m bulkops.engine.helper_child``; messages (``helper.messages``) come in
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
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from itertools import islice, repeat
from pathlib import Path
from typing import BinaryIO
from uuid import UUID

from bulkops.definition.registry import Registry, load_registry
from bulkops.engine.batches import BatchRunner
from bulkops.engine.dry_run import DryRunner
from bulkops.engine.helper.messages import (
    Finished,
    Hello,
    Job,
    Progress,
    Ready,
    Stop,
    receive,
    send,
)
from bulkops.engine.instance import OperationFailed, instantiate
from bulkops.engine.invoke import error_text
from bulkops.engine.loops import PlainRunner, Rows, run_batches, run_plain
from bulkops.engine.resume import BATCH_SIZE, read_chunk
from bulkops.engine.rows import RowRunner
from bulkops.errors import FileFormatError
from bulkops.formats import RawRow
from bulkops.observability.logs import configure, operation_scope
from bulkops.observability.metrics import ROW_BUCKETS
from bulkops.storage.records import RowRecord
from bulkops.storage.spans import append_span

log = logging.getLogger("bulkops.engine")

REPORT_ROWS = 2_000  # a progress message once this many rows finished (and on time)


class Report:
    """The helper's ``RowSink``: the rows finished since the last progress message. The
    loops add to it; it is sent when enough rows are in it, and on time by a timer too
    (the job's report interval, the parent's flush interval), so that a slow row never
    holds back the rows that finished before it. Outcomes come in row order (``ordered``):
    every row up to ``upto`` of a message is reported in it or before, none after it."""

    ordered = True
    halted = False  # a helper's operations have no failure budget

    def __init__(self, writer: asyncio.StreamWriter, job: int, upto: int) -> None:
        self._writer = writer
        self._job = job
        self.rows = 0
        self.progress = self._fresh(upto)

    def _fresh(self, upto: int) -> Progress:
        return Progress(job=self._job, upto=upto, latencies=[0] * (len(ROW_BUCKETS) + 1))

    def completed(self, first: int, last: int, at: datetime) -> None:
        """Rows ``first`` to ``last`` completed at ``at``."""
        progress = self.progress
        append_span(progress.spans, first, last, at)
        progress.upto = max(progress.upto, last)
        self.rows += last - first + 1

    def record(self, record: RowRecord) -> None:
        """A row failed."""
        progress = self.progress
        progress.failed.append(record)
        progress.upto = max(progress.upto, record.row_number)
        self.rows += 1

    def timed(self, latencies: Sequence[int], seconds: float) -> None:
        """Rows' times, per bucket of ROW_BUCKETS."""
        mine = self.progress.latencies
        for index, count in enumerate(latencies):
            mine[index] += count
        self.progress.seconds += seconds

    async def send(self) -> None:
        """Send what was added since the last progress, if anything."""
        if not self.rows:
            return
        progress, self.progress = self.progress, self._fresh(self.progress.upto)
        self.rows = 0
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
    report = Report(writer, job.id, job.chunk.first_row - 1)
    timer = asyncio.create_task(report.send_every(job.report_interval))
    failure: str | None = None
    stopped = False
    try:
        await _run_chunk(registry, job, report)
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


async def _finish(report: Report, writer: asyncio.StreamWriter, finished: Finished) -> None:
    await report.send()
    await send(writer, finished)


async def _run_chunk(registry: Registry, job: Job, report: Report) -> None:
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
            await _run_plain(DryRunner(*basics, created_by=job.created_by), rows, report)
        elif definition.is_batch:
            runner = BatchRunner(*basics, created_by=job.created_by)
            await run_batches(runner, _batches(rows, report), report)
        else:
            await _run_plain(RowRunner(*basics, created_by=job.created_by), rows, report)
    finally:
        rows.close()


async def _run_plain(runner: PlainRunner, rows: Iterator[RawRow], report: Report) -> None:
    """The rows through ``run_plain``, ``BATCH_SIZE`` at a time, with a pause between."""
    while batch := list(islice(rows, BATCH_SIZE)):
        await run_plain(runner, batch, report)
        await report.pause()


async def _batches(rows: Iterator[RawRow], report: Report) -> AsyncIterator[Rows]:
    """The rows for ``run_batches`` (none stored before), ``BATCH_SIZE`` at a time, with
    a pause between."""
    while batch := list(islice(rows, BATCH_SIZE)):
        yield zip(batch, repeat(None))
        await report.pause()


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
