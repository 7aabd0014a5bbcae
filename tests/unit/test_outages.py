"""Time storage was unreachable does not count toward abandoning a holder's work."""

from __future__ import annotations

from bulkops.engine.outages import Outages


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_outage_excuses_nothing() -> None:
    outages = Outages(Clock())
    outages.answered()
    assert outages.excused(30) == 0 and outages.quiet_for() == float("inf")


def test_an_outage_is_excused_while_it_lasts_and_for_a_while_after() -> None:
    clock = Clock()
    outages = Outages(clock)
    outages.failed()
    clock.now += 4
    assert outages.down and outages.excused(3) == 4 and outages.quiet_for() == 0
    outages.answered()
    clock.now += 1
    assert not outages.down and outages.excused(3) == 4 and outages.quiet_for() == 1
    clock.now += 2 * 3 + 4  # twice the abandon age and the outage, after it ended
    assert outages.excused(3) == 0


def test_outages_close_together_add_up() -> None:
    clock = Clock()
    outages = Outages(clock)
    for _ in range(2):
        outages.failed()
        clock.now += 2
        outages.answered()
        clock.now += 1
    assert outages.excused(30) == 4


def test_a_call_that_hung_until_its_time_limit_dates_the_outage_from_when_it_began() -> None:
    # A silent partition: the call got no answer for 3 s (its time limit), while the
    # holders it cut off stopped renewing their heartbeats when it began.
    clock = Clock()
    outages = Outages(clock)
    began = outages.now()
    clock.now += 3
    outages.failed(began)
    clock.now += 1
    outages.answered()
    assert outages.excused(3) == 4  # not 1: the 3 s without an answer count too


def test_the_longest_recent_stall_is_excused_not_the_sum_of_overlapping_calls() -> None:
    # A partition shorter than the calls' time limit: no call fails, but each waits as
    # long as it lasts, and so does every holder's heartbeat.
    clock = Clock()
    outages = Outages(clock)
    assert outages.excused(3) == 0
    started = [outages.now() + 0.1 * n for n in range(16)]  # 16 calls, overlapping
    clock.now += 2.5
    for began in started:
        outages.answered(began)
    assert not outages.down and outages.excused(3) == 2.5
    assert outages.quiet_for() == float("inf")  # a stall is not storage gone and back
    quick = outages.now()
    clock.now += 0.2
    outages.answered(quick)  # a quick answer is no stall
    assert outages.excused(3) == 2.5
    clock.now += 2 * 3 + 2.5  # no longer recent
    assert outages.excused(3) == 0


def test_an_outage_counted_already_is_not_counted_again() -> None:
    clock = Clock()
    outages = Outages(clock)
    outages.failed()
    clock.now += 10
    outages.answered()
    began = clock.now - 2  # began during the outage, failed after it
    clock.now += 2
    outages.failed(began)
    clock.now += 1
    outages.answered()
    assert outages.excused(30) == 10 + 3
