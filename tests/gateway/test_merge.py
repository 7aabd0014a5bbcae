"""Unit: the merged list order and paging, and the event interleaving."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bulkops.gateway.merge import (
    instant,
    interleave_by_time,
    merge_newest_first,
    newest_first,
    page_of,
)

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def test_instants_compare_exactly_whatever_the_fraction_digits() -> None:
    assert instant("2026-01-01T00:00:00Z") == instant("2026-01-01T00:00:00.000000+00:00")
    assert instant("2026-01-01T00:00:00.1Z") + 1 == instant("2026-01-01T00:00:00.100001Z")
    assert instant("2026-01-01T00:00:00.123456Z") - instant("2025-12-31T23:59:59.123456Z") == (
        1_000_000
    )


def test_newest_first_then_by_id() -> None:
    same = stamp(BASE)
    items = [
        {"id": "b" * 8, "createdAt": same},
        {"id": "a" * 8, "createdAt": same},
        {"id": "c" * 8, "createdAt": stamp(BASE + timedelta(microseconds=1))},
    ]
    assert [i["id"][0] for i in sorted(items, key=newest_first)] == ["c", "a", "b"]


operation = st.builds(
    lambda seconds, identity: {
        "id": str(identity),
        "createdAt": stamp(BASE + timedelta(seconds=seconds)),
    },
    st.integers(min_value=0, max_value=50),  # few distinct instants: many ties
    st.uuids(),
)


@given(
    backends=st.lists(st.lists(operation, max_size=30), min_size=1, max_size=4),
    page=st.integers(min_value=1, max_value=12),
    size=st.integers(min_value=1, max_value=10),
)
def test_a_page_of_merged_prefixes_is_the_page_of_the_union(
    backends: list[list[dict[str, Any]]], page: int, size: int
) -> None:
    # Each backend lists newest first; the gateway reads a prefix of page*size from each.
    lists = [sorted(items, key=newest_first) for items in backends]
    prefixes = [items[: page * size] for items in lists]
    union = [i for items in backends for i in items]
    by_id = sorted(union, key=lambda i: i["id"])
    expected = sorted(by_id, key=lambda i: datetime.fromisoformat(i["createdAt"]), reverse=True)
    start = (page - 1) * size
    assert page_of(merge_newest_first(prefixes), page, size) == expected[start : start + size]


def test_interleaving_keeps_each_backends_order() -> None:
    def event(sequence: int, second: int) -> dict[str, Any]:
        return {"sequence": sequence, "timestamp": stamp(BASE + timedelta(seconds=second))}

    # Backend a's timestamps are not monotonic (events committed out of order).
    merged = interleave_by_time(
        {
            "a": [event(1, 5), event(2, 1), event(3, 6)],
            "b": [event(1, 2), event(2, 4)],
        }
    )
    order = [(name, e["sequence"]) for name, e in merged]
    assert [s for n, s in order if n == "a"] == [1, 2, 3]
    assert [s for n, s in order if n == "b"] == [1, 2]
    assert order == [("b", 1), ("b", 2), ("a", 1), ("a", 2), ("a", 3)]


def test_ids_of_any_case_sort_as_the_database_does() -> None:
    identity = uuid.uuid4()
    same = stamp(BASE)
    upper = {"id": str(identity).upper(), "createdAt": same}
    assert newest_first(upper) == newest_first({"id": str(identity), "createdAt": same})
