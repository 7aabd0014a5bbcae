"""A circuit breaker per backend: after N consecutive failures, refuse calls for a while.

Written here rather than taken from a library: the asyncio-capable ones either count only
raised exceptions on wall-clock time through a message bus per call (purgatory), keep every
breaker in a process-wide registry (circuitbreaker), or are unmaintained (aiobreaker). This
one is a plain state machine on an injectable monotonic clock, so its tests need no sleeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum

log = logging.getLogger("bulkops.gateway")


class BreakerState(StrEnum):
    """Where a circuit stands."""

    CLOSED = "closed"  # calls pass; consecutive failures are counted
    OPEN = "open"  # calls are refused until the break duration has passed
    HALF_OPEN = "half-open"  # one trial call may pass; its outcome closes or reopens


class CircuitOpen(Exception):
    """The circuit refuses the call (open, or half-open with its trial call in flight)."""

    def __init__(self, name: str, retry_after: float) -> None:
        super().__init__(f"circuit of backend {name!r} is open")
        self.name = name
        self.retry_after = retry_after


class CircuitBreaker:
    """Consecutive-failure circuit breaker.

    Call ``acquire()`` before each call, then exactly one of ``success()``, ``failure()`` or
    ``release()`` (the call ended without a verdict, e.g. it was cancelled).

    Args:
        name: Names the circuit in errors and logs.
        failure_threshold: Consecutive failures that open the circuit.
        break_duration: Seconds an open circuit refuses calls before it lets a trial pass.
        clock: Monotonic seconds; injectable for tests.
    """

    def __init__(
        self,
        name: str,
        *,
        failure_threshold: int,
        break_duration: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._threshold = failure_threshold
        self._duration = break_duration
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        """The state now (an open circuit turns half-open once its break has passed)."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at < self._duration:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    @property
    def consecutive_failures(self) -> int:
        """Failures since the last success."""
        return self._failures

    def acquire(self) -> None:
        """Admit a call, or raise ``CircuitOpen``.

        Raises:
            CircuitOpen: the circuit is open, or half-open with its one trial call running.
        """
        state = self.state
        if state is BreakerState.CLOSED:
            return
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return
        raise CircuitOpen(self.name, self._retry_after())

    def success(self) -> None:
        """The admitted call succeeded: the circuit closes."""
        if self._opened_at is not None:
            log.info("Circuit of backend %r closed: the backend answers again", self.name)
        self._failures = 0
        self._opened_at = None
        self._trial_in_flight = False

    def failure(self) -> None:
        """The admitted call failed: count it, and open (or reopen) the circuit."""
        self._failures += 1
        reopen = self._trial_in_flight
        self._trial_in_flight = False
        if reopen or (self._opened_at is None and self._failures >= self._threshold):
            log.warning(
                "Circuit of backend %r opened after %d consecutive failures; refusing calls "
                "for %.1f s",
                self.name,
                self._failures,
                self._duration,
            )
            self._opened_at = self._clock()

    def release(self) -> None:
        """The admitted call ended without a verdict: a trial slot is freed, nothing counted."""
        self._trial_in_flight = False

    def _retry_after(self) -> float:
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._duration - (self._clock() - self._opened_at))
