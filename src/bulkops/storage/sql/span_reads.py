"""Plain completions stored as spans (``schema.row_spans``), read as the row records they
stand for: a span's rows are Completed at its step and time with nothing else kept, so
each is built from the span and merged in row order with the rows ``row_records`` holds.

The batch reads of both dialects (``iterate``, reports, undo), one row's look-up and the
pages (``pages``) read spans through this module; ``counts`` adds their rows in SQL.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any, Generic, TypeVar
from uuid import UUID

from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState

# A span as read: (first_row, last_row, step_index, step_name, completed_at), driver values.
SpanValues = Sequence[Any]
SPAN_COLUMNS = ("first_row", "last_row", "step_index", "step_name", "completed_at")
T = TypeVar("T")
_SELECT = f"SELECT {', '.join(SPAN_COLUMNS)} FROM row_spans WHERE operation_id = "


def spans_after_sql(placeholder: str) -> str:
    """The first spans (up to a limit) holding rows above a row number, in row order.
    Parameters: operation id, row number, limit."""
    return (
        f"{_SELECT}{placeholder} AND last_row > {placeholder} ORDER BY last_row LIMIT {placeholder}"
    )


def span_at_sql(placeholder: str) -> str:
    """The span that may hold a row: the first ending at or after it (it holds the row
    when it starts at or before it). Parameters: operation id, row number."""
    return f"{_SELECT}{placeholder} AND last_row >= {placeholder} ORDER BY last_row LIMIT 1"


def wants_completed(states: Collection[RowState] | None) -> bool:
    """Whether a read of rows in ``states`` (None: every state) reads spans too."""
    return states is None or RowState.COMPLETED in states


def holding(span: SpanValues | None, row_number: int) -> SpanValues | None:
    """``span`` when it holds ``row_number`` (``span_at_sql``'s answer), else None."""
    return span if span is not None and span[0] <= row_number <= span[1] else None


def _template(columns: Sequence[str], span: SpanValues) -> list[Any]:
    """The driver values, in ``columns`` order, of a row of ``span`` (its number unset)."""
    _, _, step_index, step_name, completed_at = span
    known = {
        "state": RowState.COMPLETED.value,
        "step_index": step_index,
        "step_name": step_name,
        "retry_attempt": 0,
        "completed_at": completed_at,
    }
    return [known.get(name) for name in columns]


def span_row(columns: Sequence[str], span: SpanValues, row_number: int) -> Sequence[Any]:
    """The driver values, in ``columns`` order, of row ``row_number`` of ``span``."""
    return next(iter(driver_rows(columns).expand(span, row_number, row_number)))


def merge(
    found: Sequence[T],
    spans: Iterable[SpanValues],
    after: int,
    limit: int,
    rows: SpanRows[T],
) -> list[T]:
    """The first ``limit`` rows above row ``after``: those of ``found`` (by row number: the
    first ``limit`` stored above ``after``) and the rows of ``spans`` (in row order, the
    first ``limit`` above ``after``), told and made by ``rows``. A row stored and in a span
    is the stored one."""
    merged: list[T] = []
    records = iter(found)
    record = next(records, None)
    done = after  # the last row number taken
    for span in spans:
        first, last = max(span[0], done + 1), span[1]
        while first <= last and len(merged) < limit:
            if record is not None and (at := rows.number(record)) <= first:
                if at > done:
                    merged.append(record)
                    done = at
                record = next(records, None)
                first = max(first, done + 1)
                continue
            stop = last if record is None else min(last, rows.number(record) - 1)
            stop = min(stop, first + limit - len(merged) - 1)
            merged.extend(rows.expand(span, first, stop))
            done, first = stop, stop + 1
        if len(merged) >= limit:
            return merged
    while record is not None and len(merged) < limit:
        if rows.number(record) > done:
            merged.append(record)
            done = rows.number(record)
        record = next(records, None)
    return merged


class SpanRows(Generic[T]):
    """How ``merge`` tells a row's number and makes a span's rows."""

    def __init__(
        self, number: Callable[[T], int], expand: Callable[[SpanValues, int, int], Iterable[T]]
    ) -> None:
        self.number = number
        self.expand = expand


def driver_rows(columns: Sequence[str]) -> SpanRows[Sequence[Any]]:
    """Rows as driver values in ``columns`` order (the batch reads of both dialects)."""
    at = columns.index("row_number")

    def expand(span: SpanValues, first: int, last: int) -> Iterator[Sequence[Any]]:
        values = _template(columns, span)
        for number in range(first, last + 1):
            values[at] = number
            yield tuple(values)

    return SpanRows(itemgetter(at), expand)


def record_rows(operation_id: UUID) -> SpanRows[RowRecord]:
    """Rows as row records read through the column types (pages)."""

    def expand(span: SpanValues, first: int, last: int) -> Iterator[RowRecord]:
        for number in range(first, last + 1):
            yield span_record(operation_id, span, number)

    return SpanRows(attrgetter("row_number"), expand)


def span_record(operation_id: UUID, span: SpanValues, row_number: int) -> RowRecord:
    """The row record of row ``row_number`` of a span read through the column types."""
    _, _, step_index, step_name, completed_at = span
    if isinstance(completed_at, datetime):  # PostgreSQL's, in the session's zone
        completed_at = completed_at.astimezone(UTC)
    return RowRecord(
        operation_id=operation_id,
        row_number=row_number,
        state=RowState.COMPLETED,
        step_index=step_index,
        step_name=step_name,
        retry_attempt=0,
        completed_at=completed_at,
    )


class SpanIndex:
    """An operation's spans that match a page's query, in row order, with the rows each
    starts after: how many of their rows lie at or below a row number, without a query."""

    def __init__(self, spans: Sequence[SpanValues]) -> None:
        self.spans = spans
        self._lasts: list[int] = [int(span[1]) for span in spans]
        self._before: list[int] = [0, *accumulate(int(s[1]) - int(s[0]) + 1 for s in spans)]

    @property
    def rows(self) -> int:
        """The rows of every span."""
        return self._before[-1]

    @property
    def last_row(self) -> int:
        """The highest row number of the spans (0 without any)."""
        return self._lasts[-1] if self._lasts else 0

    def rows_upto(self, row_number: int) -> int:
        """The spans' rows numbered at most ``row_number``."""
        place = bisect_left(self._lasts, row_number)  # the first span ending at or after it
        within = 0
        if place < len(self.spans) and self.spans[place][0] <= row_number:
            within = row_number - self.spans[place][0] + 1
        return self._before[place] + within

    def after(self, row_number: int) -> Sequence[SpanValues]:
        """The spans holding rows above ``row_number``, in row order."""
        return self.spans[bisect_right(self._lasts, row_number) :]


def first_above(offset: int, highest: int, rows_upto: Callable[[int], int]) -> int:
    """The row number after which a page at ``offset`` starts: the least number with
    ``offset`` wanted rows at or below it (``rows_upto`` counts them, one more at most per
    number), found by halving ``0 .. highest``."""
    low, high = 0, highest
    while low < high:
        middle = (low + high) // 2
        if rows_upto(middle) >= offset:
            high = middle
        else:
            low = middle + 1
    return low
