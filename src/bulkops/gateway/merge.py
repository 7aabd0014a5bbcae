"""Pure merge logic: one newest-first list from per-backend prefixes, one event order."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

Item = Mapping[str, Any]


def instant(text: str) -> int:
    """An ISO 8601 timestamp as integer microseconds since the epoch (exact, comparable).

    Raises:
        ValueError: not an ISO 8601 timestamp.
    """
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def newest_first(item: Item) -> tuple[int, str]:
    """Sort key of the operation list: ``createdAt`` descending, then ``id`` ascending (the
    order every instance lists in)."""
    return -instant(str(item["createdAt"])), str(item["id"]).lower()


def merge_newest_first(prefixes: Iterable[Sequence[Item]]) -> Iterator[Item]:
    """Merge per-backend prefixes, each already newest first, into one newest-first stream."""
    return heapq.merge(*prefixes, key=newest_first)


def page_of(merged: Iterable[T], page: int, page_size: int) -> list[T]:
    """Items of 1-based ``page`` of ``page_size`` from a merged stream."""
    start = (page - 1) * page_size
    return list(itertools.islice(merged, start, start + page_size))


def interleave_by_time(
    streams: Mapping[str, Sequence[Item]],
) -> Iterator[tuple[str, Item]]:
    """Events of several backends as ``(backend, event)`` in timestamp order.

    Each backend's own order (its sequence order) is kept even where its timestamps are not
    monotonic: the merge only ever compares the heads of the streams.
    """
    tagged = [[(name, event) for event in events] for name, events in sorted(streams.items())]
    return heapq.merge(*tagged, key=lambda pair: instant(str(pair[1]["timestamp"])))
