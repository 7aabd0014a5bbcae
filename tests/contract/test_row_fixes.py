"""RowStore fixes: a Failed row's data replaced and marked fixed at once; fixed rows
qualify for a retry round whatever step they failed at."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bulkops.storage.records import OperationQuery, RetryRequest
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores
from tests.contract.test_retry_store import finished_operation

NOW = BASE_TIME + timedelta(minutes=5)


async def test_fix_replaces_the_data_of_a_failed_row_and_marks_it_fixed(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, _ = await finished_operation(stores, make_operation, make_row)
    before = await stores.rows.get_row(operation_id, 2)
    assert before is not None
    data = {"Name": "Ann", "Age": "41", "note": {"nested": [1, 2]}}
    fixed = await stores.rows.fix_row(operation_id, 2, data, NOW)
    assert fixed is not None and fixed.row_data == data
    # Nothing else of the row changed: it is still Failed with its error, until a retry.
    assert replace(fixed, row_data=before.row_data) == before
    stored = await stores.rows.get_row(operation_id, 2)
    assert stored == fixed
    assert await stores.rows.fixes(operation_id) == {2: data}

    again = {"Name": "Bo"}
    await stores.rows.fix_row(operation_id, 2, again, NOW)
    assert await stores.rows.fixes(operation_id) == {2: again}
    assert (await stores.rows.get_row(operation_id, 2)).row_data == again  # type: ignore[union-attr]


async def test_fix_of_a_row_that_is_not_failed_or_not_stored_changes_nothing(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, _ = await finished_operation(stores, make_operation, make_row)
    completed = await stores.rows.get_row(operation_id, 1)
    assert await stores.rows.fix_row(operation_id, 1, {"x": "1"}, NOW) is None
    assert await stores.rows.get_row(operation_id, 1) == completed
    assert await stores.rows.fix_row(operation_id, 99, {"x": "1"}, NOW) is None
    assert await stores.rows.fixes(operation_id) == {}


async def test_fixes_filter_by_row_numbers_and_failed_rows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await finished_operation(stores, make_operation, make_row)
    for number in (2, 3, 5):
        assert await stores.rows.fix_row(operation_id, number, {"n": str(number)}, NOW)
    assert list(await stores.rows.fixes(operation_id)) == [2, 3, 5]
    assert list(await stores.rows.fixes(operation_id, row_numbers=[5, 1, 3])) == [3, 5]
    assert await stores.rows.fixes(operation_id, row_numbers=[]) == {}
    other = make_operation()
    await stores.operations.add(other)
    assert await stores.rows.fixes(other.id) == {}

    started = await stores.retries.begin_retry(
        RetryRequest(operation_id, version, allowed_steps=(), row_numbers=(3,)), NOW
    )
    assert started is not None and started.rows_reset == 1
    # Row 3 is Pending now: still fixed, no longer Failed.
    assert list(await stores.rows.fixes(operation_id, failed_only=True)) == [2, 5]
    assert list(await stores.rows.fixes(operation_id)) == [2, 3, 5]


async def test_fixed_rows_qualify_for_retry_at_any_step_and_keep_their_error_in_history(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    operation_id, version = await finished_operation(stores, make_operation, make_row)
    # Row 2 failed validation (step -1), row 5 at a step that allows no retry.
    await stores.rows.fix_row(operation_id, 2, {"name": "fixed two"}, NOW)
    await stores.rows.fix_row(operation_id, 5, {"name": "fixed five"}, NOW)
    started = await stores.retries.begin_retry(
        RetryRequest(operation_id, version, allowed_steps=(0, 1)), NOW
    )
    assert started is not None and started.rows_reset == 4
    assert started.record.status is OperationStatus.RETRYING
    two = await stores.rows.get_row(operation_id, 2)
    assert two is not None
    assert (two.state, two.step_index, two.retry_attempt, two.row_data) == (
        RowState.PENDING,
        -1,
        1,
        {"name": "fixed two"},
    )
    history = await stores.retries.history(operation_id, row_number=2, page=1, page_size=10)
    assert [(h.step_index, h.error_type, h.error_message) for h in history.items] == [
        (-1, ErrorType.VALIDATION, "row 2 broke")
    ]


async def test_operation_records_keep_dry_run_and_source(
    stores: Stores, make_operation: MakeOperation
) -> None:
    source = make_operation()
    await stores.operations.add(source)
    dry = make_operation(dry_run=True, source_operation_id=source.id)
    await stores.operations.add(dry)
    assert await stores.operations.get(dry.id) == dry
    assert await stores.operations.get(source.id) == source
    page = await stores.operations.list(OperationQuery(page_size=10))
    by_id = {r.id: r for r in page.items}
    assert (by_id[dry.id].dry_run, by_id[dry.id].source_operation_id) == (True, source.id)
    assert (by_id[source.id].dry_run, by_id[source.id].source_operation_id) == (False, None)
