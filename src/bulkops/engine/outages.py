"""What a process saw of its storage being unreachable, so that an outage is not mistaken
for the death of the workers it cut off."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from bulkops.errors import StorageError, StorageUnavailable

log = logging.getLogger("bulkops.engine")


# A storage call that waits this long for its answer is an outage for the time it waited.
STALLED = 1.0


class Outages:
    """Storage outages this process saw, as the heartbeat age they excuse.

    A holder cut off from storage cannot renew its heartbeat, so after an outage every
    holder's heartbeat looks old at once, although each renews it within a check of
    storage coming back. Time storage was unreachable does not count toward abandoning
    an operation: for a while after an outage (twice the abandon age) the outage's
    length is added to the age a heartbeat must reach. A holder that really died is
    taken over that much later; one that lived keeps its work instead of seeing it run
    again elsewhere while its finished rows are refused.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._down_since: float | None = None
        self._back_at: float | None = None
        self._excused = 0.0  # seconds of the recent outages

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
        if self._down_since is None or at < self._down_since:
            self._down_since = at

    def answered(self, began: float | None = None) -> None:
        """A storage call succeeded. ``began`` (``now()`` as the call began): a call that
        waited ``STALLED`` or more for its answer counts as storage unreachable meanwhile,
        as a partition shorter than the calls' time limit fails none of them while every
        holder's heartbeat waits as long."""
        if self._down_since is None and began is not None and self._clock() - began >= STALLED:
            self._down_since = began
        if self._down_since is None:
            return
        now = self._clock()
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
        if self._down_since is not None:
            return self._excused + now - self._down_since
        if self._back_at is None:
            return 0.0
        if now - self._back_at >= 2 * abandon_after + self._excused:
            self._back_at, self._excused = None, 0.0
            return 0.0
        return self._excused

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
