"""Spans: consecutive row numbers that completed at one time with nothing else to record.

A row that completes with nothing to keep but its number and time (no row data, no
business key) is never built into a record: it travels as part of a span
``[first, last, at]``, rows ``first`` to ``last`` completed at ``at``, and is stored as
its plain Completed record would be (``records.CompletedSpan``). This module is where
spans are made and joined: the row loops, a helper's reports, the recorder and the SQL
writer all go through it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

Span = list[Any]  # [first, last, at]; a list, so that the last span of a list grows in place


def append_span(spans: list[Span], first: int, last: int, at: datetime) -> None:
    """Add rows ``first`` to ``last``, completed at ``at``, to ``spans`` (kept in row
    order): they join the last span when they follow it at the same time, else they
    start one of their own."""
    if spans:
        end = spans[-1]
        if end[1] + 1 == first and (end[2] is at or end[2] == at):
            end[1] = last
            return
    spans.append([first, last, at])


def stretches(numbers: Sequence[int]) -> Iterator[tuple[int, int]]:
    """``(first, last)`` of each stretch of consecutive numbers in ``numbers`` (increasing,
    not empty): one when they follow each other without a gap, as they mostly do."""
    first, last = numbers[0], numbers[-1]
    if last - first + 1 == len(numbers):
        yield first, last
        return
    last = first
    for number in numbers[1:]:
        if number != last + 1:
            yield first, last
            first = number
        last = number
    yield first, last
