"""Chunks sized by time: where the rest of an operation is cut, and how big its chunks are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from bulkops.engine.resume import RowBatch
from bulkops.engine.spread import (
    CHUNK_SECONDS,
    GRAIN,
    TAPER,
    Cut,
    Probe,
    chunk_size,
    cut,
    fast,
    plan,
)
from bulkops.formats import ChunkStart, RawRow

STARTS = tuple(ChunkStart(first, first * 10) for first in range(1, 1001, 50))  # 1000 rows


def test_cut_makes_chunks_of_about_the_size_from_the_first_row_to_the_end() -> None:
    cuts = cut(STARTS, 101, 1000, 200)
    assert cuts == [
        Cut(101, 200, 1010),
        Cut(301, 200, 3010),
        Cut(501, 200, 5010),
        Cut(701, 200, 7010),
        Cut(901, 100, 9010),
    ]
    assert sum(c.row_count for c in cuts) == 900


def test_a_plan_cuts_the_last_chunks_of_slow_rows_smaller() -> None:
    cuts = plan(STARTS, 51, 1000, 200, 10_000)
    # Up to the last TAPER x 200 rows: chunks of 200 (one of 150 here); then of 200 / TAPER.
    assert [c.row_count for c in cuts] == [150] + [200 // TAPER] * 16
    assert cuts[0].first_row == 51 and sum(c.row_count for c in cuts) == 950


def test_a_plan_of_fast_rows_cuts_chunks_as_large_as_they_may_be() -> None:
    assert plan(STARTS, 1, 1000, 300, 300) == cut(STARTS, 1, 1000, 300)


def test_cut_of_one_row_keeps_every_start() -> None:
    assert [c.first_row for c in cut(STARTS, 1, 1000, 1)] == [s.first_row for s in STARTS]


def test_chunk_size_follows_the_pace_within_bounds() -> None:
    assert chunk_size(0.002, 10_000) == int(CHUNK_SECONDS / 0.002)  # 20 ms rows, 10 at once
    assert chunk_size(0.000001, 10_000) == 10_000  # fast rows: BULKOPS_CHUNK_ROWS
    assert chunk_size(5.0, 10_000) == GRAIN  # very slow rows: the smallest chunk
    assert chunk_size(0.0, 10_000) == 10_000


def test_a_chunk_is_whole_grains_and_never_larger_than_chunk_rows() -> None:
    assert chunk_size(0.0001, 10_000) == 5_000
    assert chunk_size(0.00013, 10_000) == 3_800  # 3,846 rows down to whole grains
    assert chunk_size(0.000001, 120) == 100  # a grain is 50 rows: 120 would need 150
    assert chunk_size(0.000001, 7) == 7  # a grain is a chunk when a chunk may hold fewer
    assert chunk_size(5.0, 7) == 7


def test_chunks_cut_for_fast_rows_are_half_as_large_as_a_chunk_may_be_or_larger() -> None:
    assert fast(chunk_size(0.00001, 10_000), 10_000)
    assert not fast(chunk_size(0.002, 10_000), 10_000)  # 20 ms rows, 10 at once


async def batches(rows: int, size: int) -> AsyncIterator[RowBatch]:
    for first in range(1, rows + 1, size):
        yield [(RawRow(n, {}, None), None) for n in range(first, min(rows, first + size - 1) + 1)]


async def test_a_probe_stops_at_a_boundary_and_the_rest_goes_on_from_there() -> None:
    probe = Probe(batches(1000, 128), {1, 301, 601})
    seen = []
    async for batch in probe.first():
        seen.extend(raw.number for raw, _ in batch)
        if len(seen) >= 200:
            probe._started = -1e9  # the probe time is up
    probe.ended()
    assert seen == list(range(1, 301)) and probe.next_row == 301 and probe.rows == 300
    rest = [raw.number async for batch in probe.rest() for raw, _ in batch]
    assert rest == list(range(301, 1001))


async def test_a_probe_of_a_short_file_reads_it_all() -> None:
    probe = Probe(batches(100, 128), {1, 51})
    seen = [raw.number async for batch in probe.first() for raw, _ in batch]
    assert seen == list(range(1, 101)) and probe.next_row == 0


async def test_a_probe_ends_at_the_first_boundary_after_its_time_within_a_batch() -> None:
    probe = Probe(batches(1000, 128), {1, 51, 101, 151, 201})
    seen = []
    async for batch in probe.first():
        seen.extend(raw.number for raw, _ in batch)
        if len(seen) >= 20:
            probe._started = -1e9  # the probe time is up after its first slow rows
    assert seen == list(range(1, 51)) and probe.next_row == 51 and probe.rows == 50
    rest = [raw.number async for batch in probe.rest() for raw, _ in batch]
    assert rest == list(range(51, 1001))


async def test_a_probe_ends_at_the_last_boundary_within_its_row_limit() -> None:
    probe = Probe(batches(1000, 30), set(range(1, 1001, 50)), limit=120, step=50)
    seen = [raw.number async for batch in probe.first() for raw, _ in batch]
    assert seen == list(range(1, 101)) and probe.next_row == 101
    rest = [raw.number async for batch in probe.rest() for raw, _ in batch]
    assert rest == list(range(101, 1001))


async def test_a_probe_paced_in_turns_counts_only_the_time_its_rows_ran() -> None:
    probe = Probe(batches(100, 128), {1, 51})
    async for _ in probe.first():
        pass
    await asyncio.sleep(0.05)  # other operations' turns between its rows
    probe.ended(turn_seconds=0.001)
    assert probe.seconds == 0.001
    assert probe.seconds_per_row == 0.001 / probe.rows


async def test_a_probe_without_turns_is_paced_by_the_wall_clock() -> None:
    probe = Probe(batches(100, 128), {1, 51})
    async for _ in probe.first():
        pass
    await asyncio.sleep(0.05)
    probe.ended()
    assert probe.seconds >= 0.05
