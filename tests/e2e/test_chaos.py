"""The chaos run in CI size: about 40 s of compound faults (workers killed, every database
connection terminated, the database restarted, silent partitions between the processes and
the database, the S3 file store refusing or answering 503) against a private PostgreSQL
server, moto's S3 server, an API process and three workers; the invariants are checked by
``benchmarks.chaos`` (see its docstring). ``make chaos`` runs longer ones on several
seeds."""

from __future__ import annotations

import pytest
from benchmarks.chaos import KINDS, postgres_bin, run_chaos


@pytest.mark.timeout(600)
def test_compound_faults_lose_nothing_and_repeat_at_most_what_was_in_flight() -> None:
    postgres_bin()  # fails, not skips, without the PostgreSQL server programs
    outcome = run_chaos(seed=7, seconds=40, rows=1500)  # a round of every kind at least
    print("\n", outcome.summary())
    kinds = {fault.kind for fault in outcome.faults}
    assert kinds == set(KINDS)  # each kind of fault happened
    # Repeats within 2 x workers x MaxRowConcurrency for every fault; run_chaos checked the
    # rest (every row once in the database, every (row, step) ran, counters, events, no 500).
    assert all(fault.repeats <= outcome.bound for fault in outcome.faults), outcome.faults
    assert 500 not in outcome.answers
