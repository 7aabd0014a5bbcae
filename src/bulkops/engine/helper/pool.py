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
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from bulkops.definition.operation import OperationDefinition
from bulkops.engine.helper.inboxes import JobInboxes, OpenJob
from bulkops.engine.helper.launch import end, kill, launch
from bulkops.engine.helper.messages import (
    Finished,
    Hello,
    HelperLost,
    Job,
    Message,
    Progress,
    Stop,
    receive,
    send,
    write,
)

log = logging.getLogger("bulkops.engine")

STOP_TIMEOUT = 10.0  # seconds for a stopped job to report its last rows
# Seconds a job may wait in a helper behind the jobs before it; longer, and its rows run
# in-process instead (a job queued behind a slow or stuck row is withdrawn).
PATIENCE = 1.0
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


class RowHelper:
    """One helper process, running one job at a time; the jobs sent while one runs wait
    in the helper and start in the order they were sent.

    One reader task reads every message of the helper and hands it to its job's inbox
    (``JobInboxes``), so each job's messages are read by its own follower, whatever the
    jobs before it do.
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
        self._inboxes = JobInboxes()  # the jobs sent and not finished, and the pace
        self._reading: asyncio.Task[None] | None = None
        self._loss: HelperLost | None = None

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
        """Start a helper and wait until it has loaded the operations (``launch``).

        Raises:
            HelperLost: it exited or failed to load them.
        """
        helper = cls(pool, await launch(hello))
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
        self._inboxes.add(job)
        try:
            await self._send(job)
        except HelperLost:
            self._inboxes.forget(job.id)
            raise
        except asyncio.CancelledError:
            # Cancelled while the pipe was full: the job is in the buffer and will arrive.
            # Its Stop follows it, nobody will read its messages, and the helper is not
            # held for it.
            with contextlib.suppress(ConnectionError, RuntimeError):
                write(self._writer, Stop(job.id))
            self._inboxes.forget(job.id)
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
        entry = self._inboxes.open.get(job.id)
        if entry is None:
            raise self._loss or HelperLost("the job is not open")
        try:
            message = await self._first(entry)
            while not isinstance(message, Finished):
                take(message)
                await room()
                message = await entry.next()
            self._inboxes.forget(job.id)
            return message
        except asyncio.CancelledError:
            await self.abandon(job, take)
            raise
        except HelperLost:
            self._inboxes.forget(job.id)
            raise
        except BaseException:  # the recorder gave up, say: the job must not run on
            self._kill()
            self._inboxes.forget(job.id)
            raise

    async def _first(self, entry: OpenJob) -> Progress | Finished:
        """The job's first message. While the jobs ahead of it would take longer than
        ``PATIENCE``, the job is withdrawn: told to stop, which the helper answers at once
        for a job that has not started (it never will), and as for any stop for one that
        just did."""
        while not entry.heard:
            try:
                async with asyncio.timeout(PATIENCE / 4):
                    return await entry.next()
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
        return await entry.next()

    async def abandon(self, job: Job, take: Callable[[Progress], None]) -> None:
        """Tell the helper to stop a submitted job (or never start it), and take what it
        reported. A run is stopped once but may be cancelled again while this drains (its
        lease and recorder both see a cancel): the drain runs to its end regardless."""
        stopping = asyncio.ensure_future(self._stop(job, take))
        while not stopping.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(stopping)

    async def _stop(self, job: Job, take: Callable[[Progress], None]) -> None:
        entry = self._inboxes.open.get(job.id)
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
                        message = await entry.next()
                except TimeoutError:
                    if self._inboxes.quiet() > STOP_TIMEOUT:
                        raise
                    continue
                if isinstance(message, Finished):
                    break
                take(message)
        except (HelperLost, TimeoutError):
            log.warning("A stopped row helper did not report its last rows; ending it")
            self._kill()
        finally:
            self._inboxes.forget(job.id)

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
        return self._inboxes.backlog(before=before, patience=PATIENCE)

    def release(self) -> None:
        """A job submitted here ended: once none is left, hand the helper back to its pool
        (a lost helper is dropped)."""
        self._holders -= 1
        if self._holders == 0:
            self._pool.give_back(self)

    async def close(self) -> None:
        """Close its stdin (it exits at once, even mid-job) and wait for it to end."""
        self._broken = True
        await end(self._process)
        if self._reading is not None:  # it may wait for room in a job nobody follows
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
        if self._loss is None:  # the followers of jobs still open hear of it
            self._loss = HelperLost("closed")
            self._inboxes.lose(self._loss)

    async def _send(self, message: Message) -> None:
        if self._loss is not None:
            raise self._loss
        try:
            await send(self._writer, message)
        except (ConnectionError, RuntimeError) as exc:
            raise self._lost(f"its pipe closed: {exc}") from None

    async def _read(self) -> None:
        """Hand every message to its job's inbox until the helper exits; then every open
        job hears that it was lost."""
        try:
            while True:
                message = await receive(self._reader)
                if not isinstance(message, Progress | Finished):
                    raise ValueError(f"unexpected {type(message).__name__}")
                await self._inboxes.deliver(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            loss = self._lost("it exited")
        except Exception as exc:
            loss = self._lost(f"unreadable message: {exc}")
        self._loss = loss
        self._inboxes.lose(loss)

    def _kill(self) -> None:
        self._broken = True
        kill(self._process)

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
