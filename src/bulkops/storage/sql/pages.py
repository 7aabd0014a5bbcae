"""Pages of row records on SQL: which rows a query wants, and how to read a page of them
without reading the operation (indexes, kept counts, row-number ranges).

``read_page`` runs on a synchronous connection, so that on SQLite a whole page is one
hop to the reader thread (``Database.read_core``); on PostgreSQL it runs through the
async connection's ``run_sync``.
"""

from __future__ import annotations

import builtins
from bisect import bisect_right
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Connection, RowMapping, Select, func, select

from bulkops.storage.records import Page, RowQuery, RowRecord
from bulkops.storage.sql.codec import row_from_mapping
from bulkops.storage.sql.kept import Kept
from bulkops.storage.sql.schema import (
    chunks,
    completed_steps,
    not_completed,
    operations,
    row_records,
    row_spans,
)
from bulkops.storage.sql.span_reads import SpanIndex, first_above, merge, record_rows
from bulkops.storage.states import ChunkState, OperationStatus, RowState

_COUNTS_KEPT = 256  # operations whose counts a process keeps
_SETTLED = frozenset({OperationStatus.COMPLETED, OperationStatus.COMPLETED_WITH_ERRORS})
# A page of Completed rows skips the others by their row numbers when there are at most
# this many (read from the state index, so the read stays small).
_FEW_OTHERS = 10_000


class PageCounts:
    """The row counts that page reads keep between reads (``Database.page_counts``):
    counted once, they save reading every row of an operation at each page.

    ``finished``: by (operation id, version), (rows, numbered without gaps) of a finished
    operation, whose rows change only through a retry, which moves the version on.
    ``prefixes``: per split operation, (last row of its Done chunks counted, row records up
    to it).
    """

    def __init__(self, size: int = _COUNTS_KEPT) -> None:
        self.finished: Kept[tuple[UUID, int], tuple[int, bool]] = Kept(size)
        self.prefixes: Kept[UUID, tuple[int, int]] = Kept(size)


def in_states(states: Collection[RowState]) -> builtins.list[ColumnElement[bool]]:
    """Row records in ``states``: with the condition of the partial state index when
    ``states`` leave Completed out, so the index serves them."""
    r = row_records.c
    wanted = list(states)
    found: builtins.list[ColumnElement[bool]] = [
        r.state == wanted[0] if len(wanted) == 1 else r.state.in_(wanted)
    ]
    if RowState.COMPLETED not in states:
        found.append(not_completed())
    return found


def row_conditions(
    query: RowQuery, *, others_only: bool = False
) -> builtins.list[ColumnElement[bool]]:
    """The terms of ``query``; ``others_only`` when no Completed row can match it (its
    step is one no Completed row reached), which lets the state index serve it."""
    r = row_records.c
    conditions: builtins.list[ColumnElement[bool]] = [r.operation_id == query.operation_id]
    if query.failed_only:
        conditions += in_states((RowState.FAILED,))
    if query.state is not None:
        conditions += in_states((query.state,))
    if others_only and query.state in (None, RowState.COMPLETED) and not query.failed_only:
        conditions.append(not_completed())
    if query.error_type is not None:
        conditions.append(r.error_type == query.error_type)
    if query.row_number is not None:
        conditions.append(r.row_number == query.row_number)
    if query.step_name is not None:
        conditions.append(r.step_name == query.step_name)
    return conditions


def page_select(
    query: RowQuery, *, gapless: bool = False, others_only: bool = False, sort: bool = False
) -> Select[Any]:
    """The rows of a page and one more (which tells whether another page follows): above
    the keyset cursor, in the row-number range of a gapless page, or at the page's offset.

    ``sort`` (with ``others_only``): the others are few, so find them on the state index
    (in state order) and sort them, rather than walk every row of the operation in row
    order, which SQLite chooses when the primary key can give the order.
    """
    r = row_records.c
    order = r.row_number + 0 if others_only and sort else r.row_number
    items = select(row_records).where(*row_conditions(query, others_only=others_only))
    items = items.order_by(order)
    offset = (query.page - 1) * query.page_size
    if query.after is not None:
        items = items.where(r.row_number > query.after)
    elif gapless:
        first = offset + 1
        items = items.where(r.row_number.between(first, first + query.page_size))
    else:
        items = items.offset(offset)
    return items.limit(query.page_size + 1)


def rows_after(query: RowQuery, number: int, *, skip: int = 0) -> Select[Any]:
    """The rows of the query numbered above ``number`` (less the first ``skip``), in
    order: a page and one more row."""
    r = row_records.c
    return (
        select(row_records)
        .where(*row_conditions(query), r.row_number > number)
        .order_by(r.row_number)
        .offset(skip or None)
        .limit(query.page_size + 1)
    )


def others_select(operation_id: UUID, *, steps: bool = False) -> Select[Any]:
    """The row numbers (and with ``steps`` the step names) of an operation's rows that are
    not Completed, from the state index, unordered (in row order SQLite would read the
    primary key instead): at most one more than a Completed page skips by number."""
    r = row_records.c
    columns = (r.row_number, r.step_name) if steps else (r.row_number,)
    return (
        select(*columns)
        .where(r.operation_id == operation_id, not_completed())
        .limit(_FEW_OTHERS + 1)
    )


def completed_steps_select(operation_id: UUID) -> Select[Any]:
    """The step names the operation's Completed rows may carry ('' for none)."""
    c = completed_steps.c
    return select(c.step_name).where(c.operation_id == operation_id)


def check_paging(page: int, page_size: int) -> None:
    """Refuse paging values that cannot select a page."""
    if page < 1 or page_size < 1:
        raise ValueError(f"page and page_size must be at least 1, got {page} and {page_size}")


def count_and_rows(
    count: Select[Any], items: Select[Any]
) -> Callable[[Connection], tuple[int, Sequence[RowMapping]]]:
    """A read (for ``Database.read_core``) of a page's count and its rows, in one
    transaction."""

    def read(conn: Connection) -> tuple[int, Sequence[RowMapping]]:
        return int(conn.execute(count).scalar_one()), conn.execute(items).mappings().all()

    return read


def read_page(conn: Connection, query: RowQuery, counts: PageCounts) -> Page[RowRecord]:
    """A page of row records matching the query, by row number.

    Filtered pages read the (operation, state, row number) index in order; a step
    filter that no Completed row can match reads it too. An unfiltered page of a
    finished operation whose rows are numbered without gaps is the range of row
    numbers it covers (no OFFSET), its count kept in ``counts`` per version; pages that every
    Completed row belongs to skip the few rows that do not (``_all_but_few``).
    """
    check_paging(query.page, query.page_size)
    spans = _matching_spans(conn, query)
    if spans is not None:
        return _page_with_spans(conn, query, spans)
    steps = _completed_steps(conn, query)
    others_only = steps is not None and query.step_name not in steps
    dense = None if query.filtered else _finished_count(conn, query, counts)
    complement = None if others_only else _all_but_few(conn, query, steps, counts)
    if complement is not None:
        total, items = complement
    elif dense is not None:
        total, items = dense[0], page_select(query, gapless=dense[1])
    elif not query.filtered and (split := _split_count(conn, query, counts)) is not None:
        total, items = split.total, split.page(query)
    else:
        conditions = row_conditions(query, others_only=others_only)
        total = conn.execute(select(func.count()).where(*conditions)).scalar_one()
        sort = others_only and _few_others(conn, query.operation_id)
        items = page_select(query, others_only=others_only, sort=sort)
    found = conn.execute(items).mappings().all()
    records = [row_from_mapping(row) for row in found[: query.page_size]]
    more = len(found) > query.page_size
    return Page(
        items=records,
        total_count=total,
        page=query.page,
        page_size=query.page_size,
        next_after=records[-1].row_number if more else None,
        keyset=query.after is not None,
    )


def _span_conditions(query: RowQuery) -> builtins.list[ColumnElement[bool]] | None:
    """The terms that pick the spans whose rows the query wants, or None when it wants no
    Completed row of a span (then every row it wants is in ``row_records``)."""
    if query.failed_only or query.error_type is not None:
        return None
    if query.state not in (None, RowState.COMPLETED):
        return None
    s = row_spans.c
    conditions = [s.operation_id == query.operation_id]
    if query.step_name is not None:
        conditions.append(s.step_name == query.step_name)
    if query.row_number is not None:
        conditions += [s.first_row <= query.row_number, s.last_row >= query.row_number]
    return conditions


def _matching_spans(conn: Connection, query: RowQuery) -> SpanIndex | None:
    """The row ranges of the operation's spans that the query wants, or None when there
    are none. Only the ranges: the rest of a span is read for the spans of the page."""
    conditions = _span_conditions(query)
    if conditions is None:
        return None
    s = row_spans.c
    ranges = select(s.first_row, s.last_row).where(*conditions).order_by(s.last_row)
    found = _one_row(query, [tuple(span) for span in conn.execute(ranges)])
    return SpanIndex(found) if found else None


def _one_row(
    query: RowQuery, spans: builtins.list[tuple[Any, ...]]
) -> builtins.list[tuple[Any, ...]]:
    """``spans`` as the query wants them: with a row number, the one row of the span
    holding it (``_span_conditions`` picked that span)."""
    number = query.row_number
    return spans if number is None else [(number, number, *span[2:]) for span in spans]


def _page_with_spans(conn: Connection, query: RowQuery, spans: SpanIndex) -> Page[RowRecord]:
    """A page of the rows the query wants of an operation whose plain completions are
    (partly) in spans: the stored rows and the spans' rows merged by row number.

    The count is the stored rows' count plus the spans' rows. A page at an offset starts
    after the least row number with that many wanted rows at or below it, found by
    halving the row numbers: in memory when the stored rows it wants are few (their
    numbers read once), else with a count of them at each step.
    """
    r = row_records.c
    conditions = row_conditions(query)
    stored = conn.execute(select(func.count(), func.max(r.row_number)).where(*conditions)).one()
    total = int(stored[0]) + spans.rows
    highest = max(spans.last_row, int(stored[1] or 0))
    offset = (query.page - 1) * query.page_size
    if query.after is not None:
        after = query.after
    elif offset >= total:
        after = highest
    elif offset == 0:
        after = 0
    elif stored[0] <= _FEW_OTHERS:
        numbers = select(r.row_number).where(*conditions).order_by(r.row_number)
        few = list(conn.execute(numbers).scalars())
        after = first_above(offset, highest, lambda n: spans.rows_upto(n) + bisect_right(few, n))
    else:

        def wanted_upto(number: int) -> int:
            counted = select(func.count()).where(*conditions, r.row_number <= number)
            return spans.rows_upto(number) + int(conn.execute(counted).scalar_one())

        after = first_above(offset, highest, wanted_upto)
    limit = query.page_size + 1
    items = (
        select(row_records)
        .where(*conditions, r.row_number > after)
        .order_by(r.row_number)
        .limit(limit)
    )
    found = [row_from_mapping(row) for row in conn.execute(items).mappings()]
    records = merge(
        found,
        _spans_after(conn, query, after, limit),
        after,
        limit,
        record_rows(query.operation_id),
    )
    page = records[: query.page_size]
    return Page(
        items=page,
        total_count=total,
        page=query.page,
        page_size=query.page_size,
        next_after=page[-1].row_number if len(records) > query.page_size else None,
        keyset=query.after is not None,
    )


def _spans_after(
    conn: Connection, query: RowQuery, after: int, limit: int
) -> builtins.list[tuple[Any, ...]]:
    """The first ``limit`` spans the query wants that hold rows above row ``after``."""
    s = row_spans.c
    wanted = (
        select(s.first_row, s.last_row, s.step_index, s.step_name, s.completed_at)
        .where(*(_span_conditions(query) or ()), s.last_row > after)
        .order_by(s.last_row)
        .limit(limit)
    )
    return _one_row(query, [tuple(span) for span in conn.execute(wanted)])


def _few_others(conn: Connection, operation_id: UUID) -> bool:
    """Whether the operation holds at most ``_FEW_OTHERS`` rows that are not Completed
    (reads at most one more on the state index)."""
    others = others_select(operation_id).subquery()
    found = conn.execute(select(func.count()).select_from(others))
    return int(found.scalar_one()) <= _FEW_OTHERS


def _completed_steps(conn: Connection, query: RowQuery) -> frozenset[str] | None:
    """The step names Completed rows of the operation may carry, for a step filter."""
    if query.step_name is None:
        return None
    found = conn.execute(completed_steps_select(query.operation_id))
    return frozenset(found.scalars())


def _all_but_few(
    conn: Connection, query: RowQuery, steps: frozenset[str] | None, counts: PageCounts
) -> tuple[int, Select[Any]] | None:
    """(count, page statement) of a page that every Completed row belongs to, of a
    completed operation whose rows are numbered without gaps and hold few others;
    else None. Such pages: the Completed rows, and the rows at the step that is the
    only one Completed rows carry (with or without the Completed filter).

    Completed rows are left out of the state index, so counting them, or skipping to a
    deep page of them, would read every row of the operation. Here they are the row
    numbers less the others left out, which the index lists: the count is a subtraction,
    and the page starts after the row number below which exactly its offset of wanted
    rows lie.
    """
    if query.after is not None or replace(query, state=None, step_name=None).filtered:
        return None
    step = query.step_name
    if query.state not in (None, RowState.COMPLETED):
        return None
    if step is not None and steps != frozenset((step,)):
        return None
    if step is None and query.state is None:
        return None  # unfiltered: the plain range
    dense = _finished_count(conn, query, counts)
    if dense is None or not dense[1]:
        return None
    select_others = others_select(query.operation_id, steps=query.state is None)
    found = conn.execute(select_others).all()
    if len(found) > _FEW_OTHERS:
        return None
    # Without a state filter the others at the step belong to the page too.
    skipped = sorted(row[0] for row in found if query.state is not None or row[1] != step)
    offset = (query.page - 1) * query.page_size
    below = offset  # the least row number with `offset` wanted rows up to it
    while (before := bisect_right(skipped, below)) + offset != below:
        below = offset + before
    return dense[0] - len(skipped), rows_after(query, below)


@dataclass(frozen=True, slots=True)
class _SplitCount:
    """The rows of a split operation: ``below`` of them up to row ``upto`` (the end of the
    Done chunks at its start), ``total`` in all."""

    total: int
    upto: int
    below: int

    def page(self, query: RowQuery) -> Select[Any]:
        """The rows of an unfiltered page. Where the rows up to ``upto`` are numbered
        without gaps, a page starting among them starts at its row number, and one after
        them skips only the rows after ``upto``: no OFFSET over the rows before."""
        if self.below != self.upto or query.after is not None:
            return page_select(query)
        offset = (query.page - 1) * query.page_size
        if offset <= self.upto:
            return rows_after(query, offset)
        return rows_after(query, self.upto, skip=offset - self.upto)


def _split_count(conn: Connection, query: RowQuery, counts: PageCounts) -> _SplitCount | None:
    """The row records of an operation split in chunks, or None when it is not.

    Rows of the Done chunks at the start of the operation never change in number (a
    Done chunk holds every row of its range it will ever hold; retries update rows,
    never add them): they are counted once, as the prefix of Done chunks grows, and
    kept. Only the rows after it are counted at each call: those of the chunks being
    processed, so a poll of a running operation's rows (the dashboard's) costs in
    proportion to the rows in progress, not to the operation.
    """
    c = chunks.c
    ranges = conn.execute(
        select(c.first_row, c.row_count, c.state)
        .where(c.operation_id == query.operation_id)
        .order_by(c.chunk_index)
    )
    found = ranges.all()
    if not found:
        return None
    prefix = 0  # the last row of the Done chunks at the start
    for first, size, state in found:
        if ChunkState(state) is not ChunkState.DONE or first != prefix + 1:
            break
        prefix = first + size - 1
    r = row_records.c
    upto, below = counts.prefixes.get(query.operation_id) or (0, 0)
    if prefix > upto:
        counted = select(func.count()).where(
            r.operation_id == query.operation_id, r.row_number.between(upto + 1, prefix)
        )
        upto, below = prefix, below + int(conn.execute(counted).scalar_one())
        counts.prefixes.put(query.operation_id, (upto, below))
    after = select(func.count()).where(r.operation_id == query.operation_id, r.row_number > upto)
    return _SplitCount(below + int(conn.execute(after).scalar_one()), upto, below)


def _finished_count(
    conn: Connection, query: RowQuery, counts: PageCounts
) -> tuple[int, bool] | None:
    """(rows, numbered without gaps) of a completed operation, else None."""
    o = operations.c
    found = conn.execute(select(o.status, o.version).where(o.id == query.operation_id)).first()
    # Completed operations only: after a cancel or a failure, rows that were in flight
    # may still be recorded.
    if found is None or OperationStatus(found[0]) not in _SETTLED:
        return None
    key = (query.operation_id, int(found[1]))
    kept = counts.finished.get(key)
    if kept is None:
        # A split operation's rows are counted from its Done chunks (kept while it ran,
        # when its pages were read); the highest row number is one step of the index.
        r = row_records.c
        mine = r.operation_id == query.operation_id
        split = _split_count(conn, query, counts)
        if split is None:
            total, highest = conn.execute(
                select(func.count(), func.max(r.row_number)).where(mine)
            ).one()
        else:
            total = split.total
            highest = conn.execute(select(func.max(r.row_number)).where(mine)).scalar_one()
        kept = (int(total), int(total) == int(highest or 0))
        counts.finished.put(key, kept)
    return kept
