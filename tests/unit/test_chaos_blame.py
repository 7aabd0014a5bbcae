"""The chaos run blames each repeated execution on the one fault that can have lost it."""

from __future__ import annotations

from benchmarks.chaos import AFTERMATH, Fault, blame

WORKER, OTHER = 101, 202


def faults() -> list[Fault]:
    return [
        Fault("restart", at=10.0, end=13.0),
        Fault("kill", at=14.0, end=14.1, victim=WORKER),
        Fault("terminate", at=16.0, end=16.1),
    ]


def test_the_kill_of_the_process_that_ran_it_is_blamed_before_an_earlier_database_fault() -> None:
    # Finished before the restart, not stored through it, lost when its worker was killed.
    assert blame(faults(), ended=9.5, pid=WORKER, redone=15.0) == faults()[1]


def test_a_kill_of_another_process_is_never_blamed() -> None:
    found = blame(faults(), ended=13.5, pid=OTHER, redone=17.0)
    assert found is not None and found.kind == "terminate"


def test_the_database_fault_in_progress_when_it_ended_is_blamed() -> None:
    found = blame(faults(), ended=11.0, pid=OTHER, redone=20.0)
    assert found is not None and found.kind == "restart"


def test_a_fault_after_the_execution_ran_again_or_long_before_it_is_not_blamed() -> None:
    found = blame(faults(), ended=13.5, pid=OTHER, redone=15.0)
    assert found is not None and found.kind == "restart"  # its aftermath, not the later one
    assert blame(faults(), ended=16.1 + AFTERMATH + 1, pid=OTHER, redone=40.0) is None
    assert blame(faults(), ended=1.0, pid=WORKER, redone=2.0) is None  # before any fault
