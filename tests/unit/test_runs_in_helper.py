"""Which operations a row helper process may run: only those whose records, counters and
limits cannot tell where their rows ran."""

from __future__ import annotations

import pytest
from benchmarks import operations as bench

from bulkops.definition import definition_of
from bulkops.definition.operation import OperationDefinition
from bulkops.engine.helper.pool import runs_in_helper
from tests.integration import control_operations as controls
from tests.integration import data_operations as dops
from tests.integration import operations as ops


def definition(cls: type) -> OperationDefinition:
    found = definition_of(cls)
    assert found is not None
    return found


@pytest.mark.parametrize("cls", [bench.BenchRows, bench.BenchBatch])
def test_a_plain_row_or_batch_operation_one_at_a_time_runs_in_a_helper(cls: type) -> None:
    assert runs_in_helper(definition(cls), max_row_concurrency=1)


def test_not_with_more_than_one_row_at_a_time() -> None:
    assert not runs_in_helper(definition(bench.BenchRows), max_row_concurrency=2)


@pytest.mark.parametrize(
    "cls",
    [
        bench.BenchPipeline,  # steps, signals
        controls.Limited,  # a rate limit
        controls.Batched,  # a batch keeping row data
    ],
)
def test_not_for_other_kinds_or_controls(cls: type) -> None:
    assert not runs_in_helper(definition(cls), max_row_concurrency=1)


def test_not_when_rows_keep_their_data_or_an_id() -> None:
    kept = [d for d in map(definition, ops.ALL) if d.track_row_data or d.overrides_row_id]
    assert kept
    assert not any(runs_in_helper(d, max_row_concurrency=1) for d in kept)


def test_not_with_a_failure_threshold() -> None:
    tolerant = [d for d in map(definition, controls.ALL) if d.controls.limits_failures]
    assert tolerant
    assert not any(runs_in_helper(d, max_row_concurrency=1) for d in tolerant)


@pytest.mark.parametrize(
    "cls", [bench.BenchPipeline, controls.Limited, controls.Batched, dops.Fixable]
)
def test_a_dry_run_of_any_kind_runs_in_a_helper_unless_its_rows_have_an_id(cls: type) -> None:
    # A validated row leaves only its number: nothing runs, so nothing is paced or budgeted.
    found = definition(cls)
    assert runs_in_helper(found, max_row_concurrency=4, dry_run=True)
    keyed = definition(ops.Record)
    assert keyed.overrides_row_id
    assert not runs_in_helper(keyed, max_row_concurrency=1, dry_run=True)
