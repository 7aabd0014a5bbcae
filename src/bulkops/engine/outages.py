"""What a process saw of its storage being unreachable, so that an outage is not mistaken
for the death of the workers it cut off."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

from bulkops.errors import StorageError, StorageUnavailable

log = logging.getLogger("bulkops.engine")


# A storage call that waits this long for its answer was a stall of storage: heartbeats
# waited as long, and the longest recent stall is excused (not their sum: calls overlap).
STALLED = 1.0


class Outages:
    """Storage outages this process saw, as the heartbeat age they excuse.

    A holder cut off from storage cannot renew its heartbeat, so after an outage every
    holder's heartbeat looks old at once, although each renews it within a check of
    storage coming back. Time storage was unreachable does not count toward abandoning
    an operation: for a while after an outage (twice the abandon age) the outage's
    length is added to the age a heartbeat must reach. A holder that really died is
    taken over that much later; one that lived keeps its work instead of seeing it run
    again elsewhere while its finished rows are refused. A call that got its answer only
    after ``STALLED`` (a partition shorter than the calls' time limit fails none of them)
    is a stall: the longest recent one is excused the same way, while it is recent; it
    does not count as storage gone and back (``quiet_for``).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._down_since: float | None = None
        self._back_at: float | None = None
        self._excused = 0.0  # seconds of the recent outages
        self._stall = 0.0  # seconds of the longest recent stall
        self._stall_end = -math.inf  # when it ended

    @property
    def down(self) -> bool:
        """Whether the last storage call failed for want of storage."""
        return self._down_since is not None

    def now(self) -> float:
        """The clock's time: what a caller passes back as ``failed``'s ``began``."""
        return self._clock()

    def failed(self, began: float | None = None) -> None:
        """A storage call found storage unreachable. ``began`` (``now()`` as the call
        began) dates the outage from the call: in a silent partition a call fails only at
        its time limit, while the holders cut off stopped renewing their heartbeats when
        it began."""
        at = self._clock() if began is None else began
        if self._back_at is not None:
            at = max(at, self._back_at)  # the outage before is counted already
        if self._down_since is None or at < self._down_since:
            self._down_since = at

    def answered(self, began: float | None = None) -> None:
        """A storage call succeeded; with ``began`` (``now()`` as the call began), one that
        waited ``STALLED`` or more for its answer is noted as a stall."""
        now = self._clock()
        if began is not None and now - began >= STALLED:
            self._stall = max(self._stall, now - began)
            self._stall_end = now
        if self._down_since is None:
            return
        self._excused += now - self._down_since
        self._down_since = None
        self._back_at = now

    def quiet_for(self) -> float:
        """Seconds since storage last came back (0 while it is down; infinite when it
        never went)."""
        if self._down_since is not None:
            return 0.0
        if self._back_at is None:
            return float("inf")
        return self._clock() - self._back_at

    def excused(self, abandon_after: float) -> float:
        """Seconds to add to ``abandon_after`` before a heartbeat counts as stale now."""
        now = self._clock()
        if now - self._stall_end >= 2 * abandon_after + self._stall:
            self._stall = 0.0  # no longer recent
        stall = self._stall
        if self._down_since is not None:
            return max(stall, self._excused + now - self._down_since)
        if self._back_at is None:
            return stall
        if now - self._back_at >= 2 * abandon_after + self._excused:
            self._back_at, self._excused = None, 0.0
            return stall
        return max(stall, self._excused)

    async def quietly(self, action: Callable[[], Awaitable[None]]) -> None:
        """Run a background storage action (a poll, a scan): a storage error is logged and
        noted here (storage unreachable), never raised; it is tried again at its next turn."""
        began = self._clock()
        try:
            await action()
        except StorageError as exc:
            if isinstance(exc, StorageUnavailable):
                self.failed(began)
            log.warning("Could not run %s; will try again", action.__name__, exc_info=True)
        else:
            self.answered()
