"""EventStore contract: the same behaviour on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from bulkops.storage.records import EventRecord
from bulkops.storage.states import EventType, Severity

if TYPE_CHECKING:
    from tests.contract.conftest import Stores

T0 = datetime(2024, 6, 1, 12, 0, 0, 654321, tzinfo=UTC)
OP_A, OP_B = uuid.uuid4(), uuid.uuid4()


def _event(message: str, *, operation_id: uuid.UUID = OP_A, minute: int = 0) -> EventRecord:
    return EventRecord(
        operation_id=operation_id,
        operation_name="import-users",
        type=EventType.STATUS_CHANGED,
        severity=Severity.INFO,
        message=message,
        timestamp=T0 + timedelta(minutes=minute),
    )


async def _append(stores: Stores, count: int, *, start: int = 0) -> None:
    await stores.events.append(
        [
            _event(f"m{i}", operation_id=OP_A if i % 2 == 0 else OP_B, minute=i)
            for i in range(start, start + count)
        ]
    )


def _messages(events: Sequence[EventRecord]) -> list[str]:
    return [e.message for e in events]


async def test_append_assigns_increasing_sequences_in_order(stores: Stores) -> None:
    await _append(stores, 3)
    await _append(stores, 2, start=3)

    found = await stores.events.read(after=0, limit=100)

    assert _messages(found) == ["m0", "m1", "m2", "m3", "m4"]
    sequences = [e.sequence for e in found]
    assert sequences == sorted(sequences) and len(set(sequences)) == 5
    assert sequences[0] >= 1


async def test_round_trips_every_field(stores: Stores) -> None:
    event = EventRecord(
        operation_id=OP_B,
        operation_name="export-orders",
        type=EventType.ROW_FAILED,
        severity=Severity.ERROR,
        message="row 17 failed: ünïcode",
        timestamp=T0,
    )
    await stores.events.append([event])

    (found,) = await stores.events.read(after=None, limit=1)

    assert found == replace(event, sequence=found.sequence)
    assert found.timestamp.utcoffset() == timedelta(0)


async def test_read_without_after_returns_the_newest_oldest_first(stores: Stores) -> None:
    await _append(stores, 6)

    assert _messages(await stores.events.read(after=None, limit=3)) == ["m3", "m4", "m5"]
    assert _messages(await stores.events.read(after=None, limit=50)) == [f"m{i}" for i in range(6)]


async def test_read_after_returns_later_events_ascending(stores: Stores) -> None:
    await _append(stores, 6)
    every = await stores.events.read(after=0, limit=100)
    third = every[2].sequence

    assert _messages(await stores.events.read(after=third, limit=2)) == ["m3", "m4"]
    assert _messages(await stores.events.read(after=third, limit=100)) == ["m3", "m4", "m5"]
    assert await stores.events.read(after=every[-1].sequence, limit=10) == []


async def test_read_filters_by_operation(stores: Stores) -> None:
    await _append(stores, 7)

    newest_a = await stores.events.read(after=None, limit=2, operation_id=OP_A)
    b_after_first = await stores.events.read(after=0, limit=2, operation_id=OP_B)

    assert _messages(newest_a) == ["m4", "m6"]
    assert _messages(b_after_first) == ["m1", "m3"]
    assert await stores.events.read(after=None, limit=5, operation_id=uuid.uuid4()) == []


async def test_read_with_zero_limit_or_nothing_stored(stores: Stores) -> None:
    assert await stores.events.read(after=None, limit=10) == []
    await _append(stores, 2)
    assert await stores.events.read(after=None, limit=0) == []
    await stores.events.append([])
    assert len(await stores.events.read(after=None, limit=10)) == 2


async def test_prune_deletes_older_events(stores: Stores) -> None:
    await _append(stores, 5)

    removed = await stores.events.prune(T0 + timedelta(minutes=2))

    assert removed == 2
    assert _messages(await stores.events.read(after=None, limit=10)) == ["m2", "m3", "m4"]
    assert await stores.events.prune(T0) == 0


async def test_sequences_keep_increasing_after_prune(stores: Stores) -> None:
    await _append(stores, 3)
    before = await stores.events.read(after=None, limit=10)

    assert await stores.events.prune(T0 + timedelta(days=1)) == 3
    await _append(stores, 2, start=3)

    after = await stores.events.read(after=None, limit=10)
    assert _messages(after) == ["m3", "m4"]
    assert min(e.sequence for e in after) > max(e.sequence for e in before)
