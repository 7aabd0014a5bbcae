"""Unit: the circuit breaker's state machine, on a fake clock."""

from __future__ import annotations

import pytest

from bulkops.gateway.breaker import BreakerState, CircuitBreaker, CircuitOpen


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breaker(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker("a", failure_threshold=3, break_duration=15, clock=clock)


def fail(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        breaker.acquire()
        breaker.failure()


def test_consecutive_failures_open_the_circuit(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    assert breaker.state is BreakerState.CLOSED and breaker.consecutive_failures == 2
    fail(breaker)
    assert breaker.state is BreakerState.OPEN
    with pytest.raises(CircuitOpen) as refused:
        breaker.acquire()
    assert refused.value.name == "a" and refused.value.retry_after == 15


def test_a_success_resets_the_count(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    breaker.acquire()
    breaker.success()
    fail(breaker, 2)
    assert breaker.state is BreakerState.CLOSED


def test_after_the_break_one_trial_passes_and_success_closes(
    breaker: CircuitBreaker, clock: Clock
) -> None:
    fail(breaker, 3)
    clock.now += 14.9
    assert breaker.state is BreakerState.OPEN
    clock.now += 0.1
    assert breaker.state is BreakerState.HALF_OPEN
    breaker.acquire()  # the trial
    with pytest.raises(CircuitOpen):
        breaker.acquire()  # only one trial at a time
    breaker.success()
    assert breaker.state is BreakerState.CLOSED and breaker.consecutive_failures == 0
    breaker.acquire()


def test_a_failed_trial_reopens_for_a_whole_break(breaker: CircuitBreaker, clock: Clock) -> None:
    fail(breaker, 3)
    clock.now += 15
    fail(breaker)  # the trial fails: one failure is enough now
    assert breaker.state is BreakerState.OPEN
    clock.now += 14
    with pytest.raises(CircuitOpen) as refused:
        breaker.acquire()
    assert refused.value.retry_after == pytest.approx(1)


def test_a_trial_without_verdict_frees_the_slot(breaker: CircuitBreaker, clock: Clock) -> None:
    fail(breaker, 3)
    clock.now += 15
    breaker.acquire()
    breaker.release()  # e.g. the caller went away
    assert breaker.state is BreakerState.HALF_OPEN
    breaker.acquire()  # another trial may go


def test_late_failures_of_calls_admitted_before_opening_do_not_extend_the_break(
    breaker: CircuitBreaker, clock: Clock
) -> None:
    for _ in range(4):
        breaker.acquire()  # four calls in flight at once
    for _ in range(3):
        breaker.failure()
    opened = clock.now
    clock.now = opened + 10
    breaker.failure()  # the fourth call fails later, while the circuit is open
    clock.now = opened + 15
    assert breaker.state is BreakerState.HALF_OPEN
