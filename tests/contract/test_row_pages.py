"""Row pages: keyset cursors, pages of completed operations, and query plans that read the
(operation, state, row number) index in order instead of scanning the operation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import Select, func, select, text

from bulkops.storage import lifecycle
from bulkops.storage.records import Fence, OperationRecord, ProgressDelta, RowQuery, RowRecord
from bulkops.storage.sql import SqlStore
from bulkops.storage.sql import pages as sql_pages
from bulkops.storage.sql.pages import others_select, page_select, row_conditions
from bulkops.storage.sql.schema import row_records
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores
from tests.contract.test_chunk_store import FRESH, NOW, chunks_of, split_operation


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


async def _plan(stores: Stores, sql: str) -> str:
    assert stores.database is not None
    async with stores.database.read() as conn:
        if stores.kind == "sqlite":
            rows = (await conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"))).all()
            return " | ".join(str(row[-1]) for row in rows)
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        return " | ".join(str(row[0]) for row in (await conn.execute(text(f"EXPLAIN {sql}"))))


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
    plan = await _plan(stores, sql)
    assert index in plan, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # no sort of the rows


@pytest.mark.parametrize("state", [None, RowState.FAILED])
async def test_a_step_no_completed_row_reached_reads_the_state_index(
    stores: Stores, state: RowState | None
) -> None:
    """Its page and its count read the state index (the page sorts the others it finds
    there rather than walk every row in order)."""
    if stores.database is None:
        pytest.skip("query plans are a SQL matter")
    query = RowQuery(OPERATION, step_name="validation", state=state, page=4)
    count = (
        select(func.count())
        .select_from(row_records)
        .where(*row_conditions(query, others_only=True))
    )
    for sql in (_literal(page_select(query, others_only=True, sort=True)), _literal(count)):
        plan = await _plan(stores, sql)
        assert STATE_INDEX in plan, plan


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


def _step_rows(make_row: MakeRow, op: OperationRecord, row_20: str) -> list[RowRecord]:
    """Rows 1-30: failed validation (3, 4, 17), failed at process (9, 30), waiting at
    process (12, running operations only), the rest Completed at process but row 20, which
    completed at ``row_20``."""
    rows = []
    for n in range(1, 31):
        if n in (3, 4, 17):
            row = make_row(op.id, n, state=RowState.FAILED, step_name="validation")
        elif n in (9, 30):
            row = make_row(op.id, n, state=RowState.FAILED, error_type=ErrorType.PROCESSING)
        elif n == 12 and op.status is OperationStatus.RUNNING:
            row = make_row(op.id, n, state=RowState.WAITING_FOR_COMPLETION, completed_at=None)
        else:
            row = make_row(op.id, n, step_name=row_20 if n == 20 else "process")
        rows.append(row)
    return rows


@pytest.mark.parametrize("few", [10_000, 2])
@pytest.mark.parametrize("settled", [True, False])
@pytest.mark.parametrize("row_20", ["process", "ship"])
async def test_step_filters_find_the_rows_whose_current_step_has_that_name(
    stores: Stores,
    make_operation: MakeOperation,
    make_row: MakeRow,
    settled: bool,
    row_20: str,
    few: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages of each step, with and without a state, on a settled operation and a running
    one, whose Completed rows are at one step (all but the failed ones and ``nowhere``
    read as every Completed row or as none) or at two (``process`` and ``ship`` mix);
    and as they read when the others are too many to skip or sort (``few`` 2)."""
    monkeypatch.setattr(sql_pages, "_FEW_OTHERS", few)
    op = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(op)
    rows = _step_rows(make_row, op, row_20)
    await stores.rows.save(op.id, rows[:15], ProgressDelta(15, 11, 4))  # two saves: the
    await stores.rows.save(op.id, rows[15:], ProgressDelta(15, 12, 3))  # names add up
    if settled:
        counts = await stores.operations.counts(op.id)
        assert await stores.operations.apply(lifecycle.finish(op, counts, BASE_TIME))

    for step in ("process", "validation", "ship", "nowhere"):
        for state in (None, RowState.COMPLETED, RowState.FAILED):
            wanted = [
                row.row_number
                for row in rows
                if row.step_name == step and (state is None or row.state is state)
            ]
            for page in range(1, 8):
                query = RowQuery(op.id, step_name=step, state=state, page=page, page_size=4)
                got = await stores.rows.page(query)
                where = f"{step}/{state}/page {page}"
                assert [r.row_number for r in got.items] == wanted[(page - 1) * 4 :][:4], where
                assert got.total_count == len(wanted), where
                assert got.has_next_page is (page * 4 < len(wanted)), where
            assert await walk(stores, RowQuery(op.id, step_name=step, state=state)) == wanted


async def test_a_step_first_completed_later_is_found(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """The names Completed rows carry grow with each save (a retried row that completes at
    a step no Completed row had reached), also for a store that has seen the operation."""
    op = await operation_with_rows(stores, make_operation, make_row, [1, 2, 3], completed=False)
    assert (await stores.rows.page(RowQuery(op.id, step_name="ship"))).items == []

    await stores.rows.save(op.id, [make_row(op.id, 2, step_name="ship")], ProgressDelta(0, 0, 0))

    found = await stores.rows.page(RowQuery(op.id, step_name="ship"))
    assert [r.row_number for r in found.items] == [2] and found.total_count == 1
    rest = await stores.rows.page(RowQuery(op.id, step_name="process"))
    assert [r.row_number for r in rest.items] == [1, 3] and rest.total_count == 2


async def test_a_save_refused_by_its_fence_lists_no_step(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """A name is known listed only once its save committed: a save the fence refused does
    not keep a later save of the same step from listing it."""
    op = make_operation(status=OperationStatus.RUNNING, worker_id="w1")
    await stores.operations.add(op)
    refused = await stores.rows.save(
        op.id, [make_row(op.id, 1, step_name="ship")], ProgressDelta(1, 1, 0), fence=Fence("w2")
    )
    assert refused is None
    await stores.rows.save(
        op.id, [make_row(op.id, 1, step_name="ship")], ProgressDelta(1, 1, 0), fence=Fence("w1")
    )

    found = await stores.rows.page(RowQuery(op.id, step_name="ship"))
    assert [r.row_number for r in found.items] == [1]


async def test_pages_of_a_running_split_operation_count_every_row_stored(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """The count of a split operation's rows, kept for its Done chunks at the start, and its
    pages (by row number where those chunks hold every row) stay right as chunks end and
    rows are stored in chunks not Done."""
    op = await split_operation(stores, make_operation, parts=4)  # rows 1-40, 10 a chunk
    chunks = chunks_of(stores)
    stored: set[int] = set()

    async def store(*numbers: int) -> None:
        await stores.rows.save(
            op.id, [make_row(op.id, n) for n in numbers], ProgressDelta(len(numbers), 0, 0)
        )
        stored.update(numbers)

    async def end(index: int) -> None:
        claimed = await chunks.claim_chunk(["import-users"], f"w{index}", NOW, FRESH)
        assert claimed is not None and claimed.index == index
        assert await chunks.end_chunk(op.id, index, f"w{index}", done=True) is not None

    async def check() -> None:
        for number in range(1, 8):  # pages before, across and after the Done chunks
            page = await stores.rows.page(RowQuery(op.id, page=number, page_size=7))
            assert page.total_count == len(stored)
            wanted = sorted(stored)[(number - 1) * 7 :][:7]
            assert [row.row_number for row in page.items] == wanted, number
            assert page.has_next_page is (number * 7 < len(stored))

    await store(*range(1, 11), 15, 16)
    await check()
    await end(0)  # chunk 0 ends: rows 1-10 counted once and kept
    await check()
    await store(17, 25, 31, 32)
    await check()
    await store(*range(11, 15), *range(18, 21))
    await end(1)  # the prefix grows to row 20
    await check()
    await store(40)
    await check()

    await store(*range(21, 40))  # every row: the operation completes, numbered without gaps
    await end(2)
    await end(3)
    current = await stores.operations.get(op.id)
    assert current is not None
    counts = await stores.operations.counts(op.id)
    assert await stores.operations.apply(lifecycle.finish(current, counts, BASE_TIME))
    await check()


async def test_two_stores_of_one_database_list_the_steps_they_store(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    """Two processes (or one after a restart) each know nothing of the names the other
    listed: both store Completed rows at the same step and at new ones, and a step filter
    read through either finds every row."""
    if stores.database is None:
        pytest.skip("two stores of one database: a SQL matter")
    other = SqlStore(stores.database)  # what a second process (or a restart) holds
    op = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(op)
    await stores.rows.save(op.id, [make_row(op.id, 1)], ProgressDelta(1, 1, 0))
    await other.save(op.id, [make_row(op.id, 2)], ProgressDelta(1, 1, 0))  # "process" again
    await other.save(op.id, [make_row(op.id, 3, step_name="ship")], ProgressDelta(1, 1, 0))
    await stores.rows.save(op.id, [make_row(op.id, 4, step_name="ship")], ProgressDelta(1, 1, 0))

    for reader in (stores.rows, other):
        found = {
            step: [r.row_number for r in (await reader.page(RowQuery(op.id, step_name=step))).items]
            for step in ("process", "ship")
        }
        assert found == {"process": [1, 2], "ship": [3, 4]}
