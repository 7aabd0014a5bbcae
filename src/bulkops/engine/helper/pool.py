"""The parent's side of the row helper processes: a second core for the rows of large
operations.

The event loop of a bulkops process reads, validates and runs rows, stores them and
answers HTTP requests, all on one core. A row helper (``process``, a child process)
takes the reading, validating and running of a whole chunk's rows off it: the chunk's
run stays here (claim, lease, recorder, end of the chunk) and records what the helper
reports. Helpers start in the background when a large file is counted or a chunk first
asks for one (that chunk runs here meanwhile), and stop with the scheduler.

A helper that dies mid-job is dropped; its chunk goes on here from the row after the
last one it reported (a row it ran but had not reported runs again, as after a crash).
A chunk waits in a busy helper only while the helper keeps pace: one held up by a slow
or stuck row gets no more jobs, and those waiting in it are withdrawn unrun.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.helper.messages import (
    Finished,
    Hello,
    Job,
    Message,
    Progress,
    Ready,
    Stop,
    receive,
    send,
    write,
)

log = logging.getLogger("bulkops.engine")

START_TIMEOUT = 60.0  # seconds for a helper to import its operations
STOP_TIMEOUT = 10.0  # seconds for a stopped job to report its last rows
# Seconds a job may wait in a helper behind the jobs before it; longer, and its rows run
# in-process instead (a job queued behind a slow or stuck row is withdrawn).
PATIENCE = 1.0
CLOSE_TIMEOUT = 5.0  # seconds for a helper to exit once its stdin closes
MAX_START_FAILURES = 3  # helpers that could not start before the pool gives up


def runs_in_helper(
    definition: OperationDefinition, max_row_concurrency: int, *, dry_run: bool = False
) -> bool:
    """Whether a helper may run the operation's rows with nothing a user sees changed: a
    plain row or batch operation (nothing to record of a completed row but its number:
    no row data, no row id), one row (or batch) at a time, no rate limit or failure
    threshold to keep. A dry run of any operation without a business key (a validated row
    leaves only its number; nothing runs, so nothing is paced or budgeted)."""
    if dry_run:
        return not definition.overrides_row_id
    controls = definition.controls
    return (
        max_row_concurrency == 1
        and not definition.is_step_based
        and not definition.track_row_data
        and not definition.overrides_row_id
        and controls.rate_limit is None
        and not controls.limits_failures
    )


class HelperLost(Exception):
    """The helper process exited, or stopped answering, during a job."""


class _Open:
    """A job submitted to a helper and not finished: its messages as the reader hands them
    over, and how far its rows went."""

    __slots__ = ("finished", "heard", "inbox", "job", "taken", "upto")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.inbox: asyncio.Queue[Progress | Finished | HelperLost] = asyncio.Queue()
        self.taken = asyncio.Event()  # a message was taken out of the inbox
        self.upto = job.chunk.first_row - 1  # rows reported so far
        self.heard = False  # a message of it came: it started (or was answered)
        self.finished = False  # its Finished came (its follower may not have read it yet)

    @property
    def remaining(self) -> int:
        return self.job.chunk.first_row + self.job.chunk.row_count - 1 - self.upto


class RowHelper:
    """One helper process, running one job at a time; the jobs sent while one runs wait
    in the helper and start in the order they were sent.

    One reader task reads every message of the helper and hands it to its job's inbox, so
    each job's messages are read by its own follower, whatever the jobs before it do. The
    reader reads a job's next message only once its follower took the one before (and
    made room for it): a slow recorder slows the helper down rather than fill memory.
    """

    def __init__(self, pool: RowHelpers, process: asyncio.subprocess.Process) -> None:
        self._pool = pool
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._writer = process.stdin
        self._reader = process.stdout
        self._broken = False
        self._jobs = 0  # jobs given so far: the next one's id
        self._holders = 0  # jobs submitted and not released
        self._open: dict[int, _Open] = {}  # by job id, in the order sent
        self._reading: asyncio.Task[None] | None = None
        self._loss: HelperLost | None = None
        self._heard_at = 0.0  # when it last reported (or was given a job while idle)
        self._rate: float | None = None  # rows per second of its recent reports
        self._room_wait = False  # the reader waits for a follower to take a message

    @property
    def pid(self) -> int:
        """The helper's process id."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether it can take another job."""
        return not self._broken and self._process.returncode is None

    @classmethod
    async def start(cls, pool: RowHelpers, hello: Hello) -> RowHelper:
        """Start a helper and wait until it has loaded the operations.

        Raises:
            HelperLost: it exited or failed to load them.
        """
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bulkops.engine.helper.process",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        helper = cls(pool, process)
        try:
            async with asyncio.timeout(START_TIMEOUT):
                await helper._send(hello)
                ready = await receive(helper._reader)
        except (HelperLost, TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            await helper.close()
            raise HelperLost(f"did not start: {exc or 'timed out'}") from None
        except BaseException:  # cancelled: leave no process behind
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise
        if not isinstance(ready, Ready) or ready.error is not None:
            await helper.close()
            error = ready.error if isinstance(ready, Ready) else type(ready).__name__
            raise HelperLost(f"could not load the operations: {error}")
        helper._reading = asyncio.create_task(helper._read())
        return helper

    async def run(
        self,
        job: Job,
        take: Callable[[Progress], None],
        room: Callable[[], Awaitable[None]],
    ) -> Finished:
        """Run ``job``: ``submit`` it, then ``follow`` it."""
        return await self.follow(await self.submit(job), take, room)

    async def submit(self, job: Job) -> Job:
        """Send ``job`` (with its id) and hold the helper for it until ``release``. A job
        sent while another runs starts as soon as the jobs before it end.

        Raises:
            HelperLost: its pipe is closed.
        """
        self._jobs += 1
        self._holders += 1
        job = replace(job, id=self._jobs)
        if all(entry.finished for entry in self._open.values()):
            self._heard_at = time.monotonic()  # idle until now: its silence starts here
        self._open[job.id] = _Open(job)
        try:
            await self._send(job)
        except HelperLost:
            self._forget(job.id)
            raise
        except asyncio.CancelledError:
            # Cancelled while the pipe was full: the job is in the buffer and will arrive.
            # Its Stop follows it, nobody will read its messages, and the helper is not
            # held for it.
            with contextlib.suppress(ConnectionError, RuntimeError):
                write(self._writer, Stop(job.id))
            self._forget(job.id)
            self.release()
            raise
        return job

    async def follow(
        self,
        job: Job,
        take: Callable[[Progress], None],
        room: Callable[[], Awaitable[None]],
    ) -> Finished:
        """Read the messages of a submitted job: each progress goes to ``take`` as it
        comes, and the next is read once ``room`` returns. When the caller is cancelled,
        the job is abandoned. A job waiting behind others that would keep it waiting
        longer than ``PATIENCE`` (a slow or stuck row ahead) is withdrawn: it ends
        ``stopped`` without having run a row (its rows run in the caller instead).

        Raises:
            HelperLost: the helper exited or broke the protocol; what it reported before
                was taken.
        """
        entry = self._open.get(job.id)
        if entry is None:
            raise self._loss or HelperLost("the job is not open")
        try:
            message = await self._first(entry)
            while not isinstance(message, Finished):
                take(message)
                await room()
                message = await self._next(entry)
            self._forget(job.id)
            return message
        except asyncio.CancelledError:
            await self.abandon(job, take)
            raise
        except HelperLost:
            self._forget(job.id)
            raise
        except BaseException:  # the recorder gave up, say: the job must not run on
            self._kill()
            self._forget(job.id)
            raise

    async def _first(self, entry: _Open) -> Progress | Finished:
        """The job's first message. While the jobs ahead of it would take longer than
        ``PATIENCE``, the job is withdrawn: told to stop, which the helper answers at once
        for a job that has not started (it never will), and as for any stop for one that
        just did."""
        while not entry.heard:
            try:
                async with asyncio.timeout(PATIENCE / 4):
                    return await self._next(entry)
            except TimeoutError:
                if not entry.heard and self._backlog(before=entry.job.id) > PATIENCE:
                    log.info(
                        "Row helper %d is held up by a slow row: the rows of chunk %d of "
                        "operation %s run in-process",
                        self.pid,
                        entry.job.chunk.index,
                        entry.job.operation_id,
                    )
                    # Withdrawn only if it has not started: one that just did runs on.
                    with contextlib.suppress(HelperLost):  # lost: its inbox says so
                        await self._send(Stop(entry.job.id, withdraw=True))
                    break
        return await self._next(entry)

    async def _next(self, entry: _Open) -> Progress | Finished:
        message = await entry.inbox.get()
        entry.taken.set()
        if isinstance(message, HelperLost):
            raise message
        return message

    async def abandon(self, job: Job, take: Callable[[Progress], None]) -> None:
        """Tell the helper to stop a submitted job (or never start it), and take what it
        reported. A run is stopped once but may be cancelled again while this drains (its
        lease and recorder both see a cancel): the drain runs to its end regardless."""
        stopping = asyncio.ensure_future(self._stop(job, take))
        while not stopping.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(stopping)

    async def _stop(self, job: Job, take: Callable[[Progress], None]) -> None:
        entry = self._open.get(job.id)
        if entry is None:
            return
        try:
            with contextlib.suppress(HelperLost):  # lost: what it reported is still taken
                await self._send(Stop(job.id))
            # A job waiting behind others is answered at once; a running one once the row
            # running is cancelled. Given up after STOP_TIMEOUT of silence (not counting
            # the time the reader waits for another job's follower to take a message).
            while True:
                try:
                    async with asyncio.timeout(1.0):
                        message = await self._next(entry)
                except TimeoutError:
                    if self._quiet() > STOP_TIMEOUT:
                        raise
                    continue
                if isinstance(message, Finished):
                    break
                take(message)
        except (HelperLost, TimeoutError):
            log.warning("A stopped row helper did not report its last rows; ending it")
            self._kill()
        finally:
            self._forget(job.id)

    @property
    def jobs(self) -> int:
        """How many jobs it holds: the one it runs and those waiting behind it."""
        return self._holders

    def backlog(self) -> float:
        """Seconds a job sent now would wait before it starts, estimated from the rows of
        the jobs it holds and the pace of its reports; infinite when it ran a job without
        a word for ``PATIENCE`` (a slow or stuck row)."""
        return self._backlog(before=None)

    def _backlog(self, *, before: int | None) -> float:
        ahead = [
            entry
            for entry in self._open.values()
            if not entry.finished and (before is None or entry.job.id < before)
        ]
        if not ahead:
            return 0.0
        # Reports come every report interval at least while rows finish.
        patience = max(PATIENCE, *(2 * entry.job.report_interval for entry in ahead))
        if self._quiet() > patience:
            return math.inf
        if self._rate is None:
            return 0.0  # started it a moment ago: no pace yet
        return sum(entry.remaining for entry in ahead) / self._rate

    def _quiet(self) -> float:
        """Seconds the helper said nothing while the reader was ready to listen."""
        return 0.0 if self._room_wait else time.monotonic() - self._heard_at

    def release(self) -> None:
        """A job submitted here ended: once none is left, hand the helper back to its pool
        (a lost helper is dropped)."""
        self._holders -= 1
        if self._holders == 0:
            self._pool.give_back(self)

    async def close(self) -> None:
        """Close its stdin (it exits at once, even mid-job) and wait for it to end."""
        self._broken = True
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._writer.close()
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await self._process.wait()
        except TimeoutError:
            self._process.kill()
            await self._process.wait()
        if self._reading is not None:  # it may wait for room in a job nobody follows
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
        if self._loss is None:  # the followers of jobs still open hear of it
            self._loss = HelperLost("closed")
            for entry in self._open.values():
                entry.inbox.put_nowait(self._loss)

    async def _send(self, message: Message) -> None:
        if self._loss is not None:
            raise self._loss
        try:
            await send(self._writer, message)
        except (ConnectionError, RuntimeError) as exc:
            raise self._lost(f"its pipe closed: {exc}") from None

    async def _read(self) -> None:
        """Hand every message to its job's inbox (those of jobs no longer open are passed
        over), until the helper exits; then every open job hears that it was lost."""
        try:
            while True:
                message = await receive(self._reader)
                if not isinstance(message, Progress | Finished):
                    raise ValueError(f"unexpected {type(message).__name__}")
                self._heard(message)
                entry = self._open.get(message.job)
                if entry is None:
                    continue
                entry.heard = True
                entry.inbox.put_nowait(message)
                if entry.inbox.qsize() > 1:
                    self._room_wait = True
                    while entry.inbox.qsize() > 1 and self._open.get(message.job) is entry:
                        entry.taken.clear()
                        await entry.taken.wait()
                    self._room_wait = False
                    self._heard_at = time.monotonic()  # listening again: silence from now
        except (asyncio.IncompleteReadError, ConnectionError):
            loss = self._lost("it exited")
        except Exception as exc:
            loss = self._lost(f"unreadable message: {exc}")
        self._loss = loss
        for entry in self._open.values():
            entry.inbox.put_nowait(loss)

    def _heard(self, message: Progress | Finished) -> None:
        """Note the helper's pace from a report. The end of a job that never started (a
        withdrawn one) says nothing of it: the job running may still be stuck."""
        now = time.monotonic()
        entry = self._open.get(message.job)
        if isinstance(message, Finished):
            head = next((each for each in self._open.values() if not each.finished), None)
            if entry is None or entry is head:
                self._heard_at = now
            if entry is not None:
                entry.finished = True
            return
        if entry is not None:
            rows = message.upto - entry.upto
            entry.upto = message.upto
            if rows > 0 and message.seconds > 0:  # the rows' own time, in the helper
                rate = rows / message.seconds
                self._rate = rate if self._rate is None else (self._rate + rate) / 2
        self._heard_at = now

    def _forget(self, job_id: int) -> None:
        """Its messages are all read (or never will be)."""
        entry = self._open.pop(job_id, None)
        if entry is not None:
            entry.taken.set()  # a reader waiting for room goes on

    def _kill(self) -> None:
        self._broken = True
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()

    def _lost(self, reason: str) -> HelperLost:
        self._kill()
        return HelperLost(reason)


class RowHelpers:
    """Up to ``count`` helper processes that load the operations of ``sources``."""

    def __init__(
        self,
        count: int,
        sources: Sequence[str],
        *,
        log_format: str = "text",
        log_level: int = logging.INFO,
    ) -> None:
        self._count = count
        self._hello = Hello(list(sources), list(sys.path), log_format, log_level)
        self._idle: list[RowHelper] = []
        self._all: set[RowHelper] = set()
        self._starting: set[asyncio.Task[None]] = set()
        self._closing: set[asyncio.Task[None]] = set()  # helpers dropped after a job
        self._failures = 0
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The process ids of the running helpers."""
        return [helper.pid for helper in self._all if helper.alive]

    def take(self) -> RowHelper | None:
        """A helper for one job: an idle one, else the busy one that will be free first
        (the new job starts there the moment the jobs it holds end), if that is within
        ``PATIENCE``. None while none is up yet (one more is started in the background
        when there is room for it), or while every helper is held up by slow rows.

        A job queues behind a busy helper rather than running in-process beside it: the
        helper, which runs rows faster than the event loop, then never idles between
        chunks while the loop's slots are busy with slower in-process ones.
        """
        while self._idle:
            helper = self._idle.pop()
            if helper.alive:
                return helper
            self._drop(helper)  # it died while idle: end and reap it
        self._start_one()
        waits = [(helper.backlog(), helper.jobs, helper) for helper in self._all if helper.alive]
        if not waits:
            return None
        wait, _, helper = min(waits, key=lambda each: each[:2])
        return helper if wait <= PATIENCE else None

    def warm(self) -> None:
        """Start the helpers in the background, ahead of their first job."""
        while self._start_one():
            pass

    async def ready(self) -> None:
        """Start every helper now and wait until they can take jobs (those that fail to
        start are logged, as in the background)."""
        self.warm()
        await asyncio.gather(*self._starting, return_exceptions=True)

    def give_back(self, helper: RowHelper) -> None:
        """A helper's job ended."""
        if helper.alive and not self._closed:
            self._idle.append(helper)
            return
        self._drop(helper)

    def _drop(self, helper: RowHelper) -> None:
        self._all.discard(helper)
        task = asyncio.create_task(helper.close())  # ends it (if need be) and reaps it
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _start_one(self) -> bool:
        if (
            self._closed
            or self._failures >= MAX_START_FAILURES
            or len(self._all) + len(self._starting) >= self._count
        ):
            return False
        task = asyncio.create_task(self._start())
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)
        return True

    async def _start(self) -> None:
        try:
            helper = await RowHelper.start(self, self._hello)
        except (HelperLost, OSError) as exc:
            self._failures += 1
            log.warning("A row helper process could not start (%s); rows run in-process", exc)
            return
        if self._closed:
            await helper.close()
            return
        self._all.add(helper)
        self._idle.append(helper)
        log.info("Row helper process %d started", helper.pid)

    async def close(self) -> None:
        """Stop every helper (call once no job runs)."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()  # a helper cancelled while it starts is killed
        await asyncio.gather(*self._starting, *self._closing, return_exceptions=True)
        helpers, self._idle = list(self._all), []
        self._all.clear()
        await asyncio.gather(*(helper.close() for helper in helpers))
