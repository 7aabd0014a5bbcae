"""Row pages: keyset cursors, pages of completed operations, and query plans that read the
(operation, state, row number) index in order instead of scanning the operation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import Select, text

from bulkops.storage import lifecycle
from bulkops.storage.records import OperationRecord, ProgressDelta, RowQuery
from bulkops.storage.sql.rows import others_select, page_select
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores


async def operation_with_rows(
    stores: Stores,
    make_operation: MakeOperation,
    make_row: MakeRow,
    numbers: list[int],
    *,
    failed: set[int] = frozenset(),  # type: ignore[assignment]
    completed: bool = True,
) -> OperationRecord:
    op = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(op)
    rows = [
        make_row(op.id, n, state=RowState.FAILED, error_type=ErrorType.PROCESSING)
        if n in failed
        else make_row(op.id, n)
        for n in numbers
    ]
    await stores.rows.save(op.id, rows, ProgressDelta(len(rows), len(rows) - len(failed), 0))
    if completed:
        counts = await stores.operations.counts(op.id)
        done = await stores.operations.apply(lifecycle.finish(op, counts, BASE_TIME))
        assert done is not None
        return done
    return op


async def walk(stores: Stores, query: RowQuery) -> list[int]:
    """Every row number, page by page through the keyset cursor."""
    seen: list[int] = []
    after: int | None = 0
    while after is not None:
        page = await stores.rows.page(replace(query, after=after))
        seen += [row.row_number for row in page.items]
        assert page.has_next_page is (page.next_after is not None)
        after = page.next_after
    return seen


@pytest.mark.parametrize("completed", [True, False])
async def test_the_keyset_cursor_walks_every_row_once(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, completed: bool
) -> None:
    numbers = [n for n in range(1, 24) if n != 9]  # a gap, as a skipped row leaves
    op = await operation_with_rows(
        stores, make_operation, make_row, numbers, failed={3, 4, 17}, completed=completed
    )

    assert await walk(stores, RowQuery(op.id, page_size=5)) == numbers
    assert await walk(stores, RowQuery(op.id, page_size=2, failed_only=True)) == [3, 4, 17]
    last = await stores.rows.page(RowQuery(op.id, page_size=5, after=20))
    assert [r.row_number for r in last.items] == [21, 22, 23]
    assert last.next_after is None and last.total_count == 22


@pytest.mark.parametrize("numbers", [list(range(1, 31)), [n for n in range(1, 32) if n != 12]])
async def test_pages_of_a_completed_operation_are_its_rows_in_order(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow, numbers: list[int]
) -> None:
    op = await operation_with_rows(stores, make_operation, make_row, numbers)

    for _ in range(2):  # the second time from the kept count
        pages = [await stores.rows.page(RowQuery(op.id, page=p, page_size=7)) for p in (1, 2, 5)]
        assert [r.row_number for r in pages[0].items] == numbers[:7]
        assert [r.row_number for r in pages[1].items] == numbers[7:14]
        assert [r.row_number for r in pages[2].items] == numbers[28:35]
        assert all(page.total_count == 30 for page in pages)
        assert [page.has_next_page for page in pages] == [True, True, False]
        assert pages[0].next_after == numbers[6] and pages[2].next_after is None


async def test_a_retry_changes_the_rows_a_completed_page_shows(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await operation_with_rows(stores, make_operation, make_row, [1, 2, 3], failed={2})
    before = await stores.rows.page(RowQuery(op.id, state=RowState.FAILED))
    assert [r.row_number for r in before.items] == [2]
    unfiltered = await stores.rows.page(RowQuery(op.id))
    assert unfiltered.total_count == 3

    retried = await stores.operations.apply(lifecycle.begin_retry(op, BASE_TIME))
    assert retried is not None and retried.version != op.version
    await stores.rows.save(op.id, [make_row(op.id, 4)], ProgressDelta(1, 1, 0))

    assert (await stores.rows.page(RowQuery(op.id))).total_count == 4


OPERATION = UUID("00000000-0000-0000-0000-000000000001")
EXPLAINED = [
    RowQuery(OPERATION, failed_only=True, page=3),
    RowQuery(OPERATION, state=RowState.COMPLETED, page=2),
    RowQuery(OPERATION, failed_only=True, error_type=ErrorType.VALIDATION),
    RowQuery(OPERATION, state=RowState.FAILED, after=500),
]


def _page_sql(query: RowQuery) -> str:
    """The statement the SQL store runs for a filtered page, as literal SQL."""
    return _literal(page_select(query))


def _literal(statement: Select[Any]) -> str:
    return str(statement.compile(compile_kwargs={"literal_binds": True}))


STATE_INDEX = "ix_row_records_operation_id_state_row_number"


@pytest.mark.parametrize("query", [*EXPLAINED, None])
async def test_filtered_pages_read_the_state_index_in_row_order(
    stores: Stores, query: RowQuery | None
) -> None:
    """Pages of one state read an index in row order: the partial state index, or for
    Completed rows (left out of it) the primary key. A page of Completed rows of a completed
    operation reads the row numbers of the others (None here) from the state index."""
    if stores.database is None:
        pytest.skip("query plans are a SQL matter")
    index = STATE_INDEX
    if query is not None and query.state is RowState.COMPLETED:
        index = "sqlite_autoindex_row_records_1" if stores.kind == "sqlite" else "pk_row_records"
    sql = _page_sql(query) if query is not None else _literal(others_select(OPERATION))
    async with stores.database.read() as conn:
        if stores.kind == "sqlite":
            plan = " | ".join(
                str(row[-1])
                for row in (await conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"))).all()
            )
            assert index in plan, plan
            assert "TEMP B-TREE" not in plan, plan  # no sort of the matching rows
        else:
            await conn.execute(text("SET LOCAL enable_seqscan = off"))
            plan = " | ".join(
                str(row[0]) for row in (await conn.execute(text(f"EXPLAIN {sql}"))).all()
            )
            assert index in plan, plan
            assert "Sort" not in plan, plan


@pytest.mark.parametrize(
    ("numbers", "failed"),
    [
        (list(range(1, 31)), set()),
        (list(range(1, 31)), {1, 2, 9, 10, 11, 30}),
        ([n for n in range(1, 32) if n != 12], {1, 20}),  # a gap: counted the plain way
    ],
)
async def test_pages_of_completed_rows_skip_the_others(
    stores: Stores,
    make_operation: MakeOperation,
    make_row: MakeRow,
    numbers: list[int],
    failed: set[int],
) -> None:
    op = await operation_with_rows(stores, make_operation, make_row, numbers, failed=failed)
    completed = [n for n in numbers if n not in failed]

    for page in range(1, 9):
        got = await stores.rows.page(
            RowQuery(op.id, state=RowState.COMPLETED, page=page, page_size=4)
        )
        assert [r.row_number for r in got.items] == completed[(page - 1) * 4 : page * 4]
        assert got.total_count == len(completed)
        assert got.has_next_page is (page * 4 < len(completed))
