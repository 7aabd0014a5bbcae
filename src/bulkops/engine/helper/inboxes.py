"""What a row helper reported of each job sent to it, and the pace those reports show.

The parent reads everything a helper says in one task and hands each message to its
job's inbox, where the job's follower takes it; the reader hands a job's next message
over only once its follower took the one before, so a slow recorder slows the helper down
rather than fill memory. The same reports tell how fast the helper's rows run, and so how
long a job sent to it now would wait.
"""

from __future__ import annotations

import asyncio
import math
import time

from bulkops.engine.helper.messages import Finished, HelperLost, Job, Progress


class OpenJob:
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
        """Rows of the job not reported yet."""
        return self.job.chunk.first_row + self.job.chunk.row_count - 1 - self.upto

    async def next(self) -> Progress | Finished:
        """The job's next message, once the reader handed it over.

        Raises:
            HelperLost: the helper was lost before the job finished.
        """
        message = await self.inbox.get()
        self.taken.set()
        if isinstance(message, HelperLost):
            raise message
        return message


class JobInboxes:
    """The jobs sent to one helper and not finished, by id in the order sent, and the
    helper's pace: when it last spoke, and how fast its rows run by its reports."""

    def __init__(self) -> None:
        self.open: dict[int, OpenJob] = {}
        self._heard_at = 0.0  # when it last reported (or was given a job while idle)
        self._rate: float | None = None  # rows per second of its recent reports
        self._room_wait = False  # the reader waits for a follower to take a message

    def add(self, job: Job) -> OpenJob:
        """Open the inbox of a job being sent."""
        if all(entry.finished for entry in self.open.values()):
            self._heard_at = time.monotonic()  # idle until now: its silence starts here
        entry = self.open[job.id] = OpenJob(job)
        return entry

    def forget(self, job_id: int) -> None:
        """Its messages are all read (or never will be)."""
        entry = self.open.pop(job_id, None)
        if entry is not None:
            entry.taken.set()  # a reader waiting for room goes on

    async def deliver(self, message: Progress | Finished) -> None:
        """Hand a message to its job's inbox (one of a job no longer open is passed over),
        and return once the job's follower has room for the next."""
        self._heard(message)
        entry = self.open.get(message.job)
        if entry is None:
            return
        entry.heard = True
        entry.inbox.put_nowait(message)
        if entry.inbox.qsize() > 1:
            self._room_wait = True
            while entry.inbox.qsize() > 1 and self.open.get(message.job) is entry:
                entry.taken.clear()
                await entry.taken.wait()
            self._room_wait = False
            self._heard_at = time.monotonic()  # listening again: silence from now

    def lose(self, loss: HelperLost) -> None:
        """Every open job hears that the helper was lost."""
        for entry in self.open.values():
            entry.inbox.put_nowait(loss)

    def backlog(self, *, before: int | None, patience: float) -> float:
        """Seconds a job sent after the open jobs (those before job ``before``) would wait
        before it starts, estimated from their rows not reported yet and the pace of the
        reports; infinite when the helper ran a job without a word for ``patience`` (or
        twice a job's report interval, when longer): a slow or stuck row."""
        ahead = [
            entry
            for entry in self.open.values()
            if not entry.finished and (before is None or entry.job.id < before)
        ]
        if not ahead:
            return 0.0
        # Reports come every report interval at least while rows finish.
        patience = max(patience, *(2 * entry.job.report_interval for entry in ahead))
        if self.quiet() > patience:
            return math.inf
        if self._rate is None:
            return 0.0  # started it a moment ago: no pace yet
        return sum(entry.remaining for entry in ahead) / self._rate

    def quiet(self) -> float:
        """Seconds the helper said nothing while the reader was ready to listen."""
        return 0.0 if self._room_wait else time.monotonic() - self._heard_at

    def _heard(self, message: Progress | Finished) -> None:
        """Note the helper's pace from a report. The end of a job that never started (a
        withdrawn one) says nothing of it: the job running may still be stuck."""
        now = time.monotonic()
        entry = self.open.get(message.job)
        if isinstance(message, Finished):
            head = next((each for each in self.open.values() if not each.finished), None)
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
