"""The chaos run in CI size: two runs of about 25 s of compound faults (workers killed,
every database connection terminated, the database restarted; silent partitions between
the processes and the database, the S3 file store refusing or answering 503) against a
private PostgreSQL server, moto's S3 server, an API process and three workers; the
invariants are checked by ``benchmarks.chaos`` (see its docstring). ``make chaos`` runs
longer ones with every kind on several seeds."""

from __future__ import annotations

import pytest
from benchmarks.chaos import KINDS, postgres_bin, run_chaos

# The database faults with kills, and the faults beyond the database without them, each in a
# run of its own and held to the bound; `make chaos` and scenario 18 deal every kind together.
DATABASE_FAULTS = ("kill", "terminate", "restart")
BEYOND_THE_DATABASE = ("partition", "store", "terminate", "restart")


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "kinds",
    [DATABASE_FAULTS, BEYOND_THE_DATABASE],
    ids=["kills", "beyond"],
)
def test_compound_faults_lose_nothing_and_repeat_at_most_what_was_in_flight(
    kinds: tuple[str, ...],
) -> None:
    postgres_bin()  # fails, not skips, without the PostgreSQL server programs
    outcome = run_chaos(seed=7, seconds=25, rows=1500, kinds=kinds)  # every kind at least once
    print("\n", outcome.summary())
    assert {fault.kind for fault in outcome.faults} == set(kinds) <= set(KINDS)
    # Repeats within 2 x workers x MaxRowConcurrency for every fault; run_chaos checked the
    # rest (every row once in the database, every (row, step) ran, counters, events, no 500).
    assert 500 not in outcome.answers
    over = [fault for fault in outcome.faults if fault.repeats > outcome.bound]
    if over and kinds == DATABASE_FAULTS:  # run_chaos's other invariants held
        pytest.xfail(
            "open defect (issue 37): on a loaded machine a killed worker can repeat more "
            "than 2 x workers x MaxRowConcurrency executions (the rows running when a slow "
            f"write begins finish unstored during it): {over}"
        )
    assert not over, outcome.faults
