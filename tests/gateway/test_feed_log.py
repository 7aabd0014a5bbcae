"""Unit: numbering of the merged event log (no HTTP): nothing twice, nothing skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bulkops.gateway.feed import MergedFeed, Pull

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def events(*pairs: tuple[int, int]) -> list[dict[str, Any]]:
    """Events as (local sequence, second) pairs."""
    return [
        {
            "sequence": sequence,
            "timestamp": (BASE + timedelta(seconds=second)).isoformat(),
            "message": f"{sequence}@{second}",
        }
        for sequence, second in pairs
    ]


def messages(found: list[dict[str, Any]]) -> list[str]:
    return [e["message"] for e in found]


def test_the_first_intake_numbers_history_up_to_the_sum_of_the_newest_sequences() -> None:
    feed = MergedFeed([], timeout=1)
    feed.take_in(
        {
            "a": Pull(events((41, 1), (42, 3)), fresh_start=True),
            "b": Pull(events((7, 2)), fresh_start=True),
        }
    )
    found = feed.select(None, 10)
    assert messages(found) == ["41@1", "7@2", "42@3"]
    # Positions start before the first event: a=40, b=6; each intake raises one.
    assert [e["sequence"] for e in found] == [47, 48, 49]
    assert feed.cursor == 42 + 7


def test_only_events_above_a_backends_position_are_taken_in() -> None:
    feed = MergedFeed([], timeout=1)
    feed.take_in({"a": Pull(events((1, 1), (2, 2)), fresh_start=True)})
    # Two concurrent requests pulled overlapping ranges: each event is kept once.
    feed.take_in({"a": Pull(events((2, 2), (3, 3)))})
    feed.take_in({"a": Pull(events((3, 3), (4, 4)))})
    assert messages(feed.select(0, 10)) == ["1@1", "2@2", "3@3", "4@4"]


def test_a_cursor_from_any_event_continues_after_it() -> None:
    feed = MergedFeed([], timeout=1)
    feed.take_in(
        {"a": Pull(events((1, 1), (2, 4)), fresh_start=True), "b": Pull(events(), fresh_start=True)}
    )
    seen = feed.select(None, 100)
    feed.take_in({"b": Pull(events((1, 5), (2, 6))), "a": Pull(events((3, 7)))})
    after = feed.select(seen[-1]["sequence"], 100)
    assert messages(after) == ["1@5", "2@6", "3@7"]
    assert [e["sequence"] for e in after] == [3, 4, 5]
    assert messages(feed.select(after[0]["sequence"], 1)) == ["2@6"]
    assert feed.select(after[-1]["sequence"], 100) == []


def test_a_backend_that_joins_late_only_moves_the_numbers_up() -> None:
    feed = MergedFeed([], timeout=1)
    feed.take_in({"a": Pull(events((1, 1)), fresh_start=True)})
    cursor = feed.select(None, 1)[-1]["sequence"]
    feed.take_in({"b": Pull(events((500, 0), (501, 2)), fresh_start=True)})
    late = feed.select(cursor, 10)
    assert messages(late) == ["500@0", "501@2"]  # older timestamps, yet after the cursor
    assert all(e["sequence"] > cursor for e in late)


def test_events_of_refused_backends_are_left_out_of_that_answer() -> None:
    feed = MergedFeed([], timeout=1)
    feed.take_in(
        {
            "a": Pull(events((1, 1), (2, 3)), fresh_start=True),
            "b": Pull(events((1, 2)), fresh_start=True),
        }
    )
    assert messages(feed.select(0, 10, exclude={"b"})) == ["1@1", "2@3"]
    assert messages(feed.select(None, 1, exclude={"a"})) == ["1@2"]


def test_the_log_keeps_a_bounded_tail_and_laggards_see_a_gap() -> None:
    feed = MergedFeed([], timeout=1, tail=3)
    feed.take_in({"a": Pull(events((1, 1)), fresh_start=True)})
    for sequence in range(2, 12):
        feed.take_in({"a": Pull(events((sequence, sequence)))})
    kept = feed.select(0, 100)
    assert 3 <= len(kept) <= 6
    assert kept[-1]["message"] == "11@11"
    assert [e["sequence"] for e in kept] == list(range(12 - len(kept), 12))
