"""Two OS processes share one SQLite file, as an API process and a worker process do.

They hammer ``save`` / ``apply`` (claims and failures) / ``append`` at the same time. No
"database is locked" error may escape, counters must end exact, exactly one claimer of each
(id, version) wins, and every change's event is stored once.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import traceback
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bulkops.storage import lifecycle
from bulkops.storage.records import (
    EventRecord,
    OperationRecord,
    ProgressDelta,
    RowQuery,
    RowRecord,
)
from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
from bulkops.storage.states import EventType, OperationStatus, RowState, Severity

PROCESSES = 2
CLAIMERS_PER_PROCESS = 2
RACED_OPERATIONS = 15
BATCHES, BATCH_SIZE = 25, 200
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
TIMEOUT = 90.0


def _operation(status: OperationStatus = OperationStatus.PENDING) -> OperationRecord:
    return OperationRecord(
        id=uuid.uuid4(),
        operation_name="import-users",
        status=status,
        created_by="alice",
        created_at=NOW,
        source="api",
        file_id="f",
        file_name="users.csv",
        file_size=1,
        file_format="csv",
        metadata={},
    )


async def _hammer(
    url: str, index: int, counted: uuid.UUID, raced: list[uuid.UUID], barrier: Any
) -> dict[str, Any]:
    database = Database.from_url(url)
    store, events = SqlStore(database), SqlEventStore(database)
    worker = f"process-{index}"
    claimed: list[str] = []

    async def save_batches() -> None:
        for batch in range(BATCHES):
            first = index * 1_000_000 + batch * BATCH_SIZE + 1
            rows = [
                RowRecord(operation_id=counted, row_number=n, state=RowState.COMPLETED)
                for n in range(first, first + BATCH_SIZE)
            ]
            await store.save(counted, rows, ProgressDelta(BATCH_SIZE, BATCH_SIZE, 0))
            await store.page(RowQuery(counted, page_size=5))  # readers interleave
            if batch % 5 == 0:
                # Reads, then writes: only BEGIN IMMEDIATE keeps this free of SQLITE_BUSY,
                # and only atomicity keeps the counters exact while the other process saves.
                await store.counts(counted)

    async def claim_all(claimer: int) -> None:
        for operation_id in raced:
            pending = replace(_operation(), id=operation_id)
            change = lifecycle.claim(pending, f"{worker}/{claimer}", NOW)
            if await store.apply(change) is not None:
                claimed.append(str(operation_id))
            event = EventRecord(
                counted, "import-users", EventType.CREATED, Severity.INFO, worker, NOW
            )
            await events.append([event, event])

    try:
        barrier.wait(TIMEOUT)  # both processes start together
        claimers = (claim_all(c) for c in range(CLAIMERS_PER_PROCESS))
        await asyncio.gather(save_batches(), *claimers)
        barrier.wait(TIMEOUT)  # every claim is done everywhere before the transitions race
        failed = []
        for operation_id in raced:
            running = replace(_operation(OperationStatus.RUNNING), id=operation_id, version=1)
            moved = await store.apply(lifecycle.fail(running, worker, NOW))
            if moved is not None:
                failed.append(str(operation_id))
        return {"claimed": claimed, "failed": failed}
    finally:
        await database.close()


def _hammer_process(
    url: str, index: int, counted: str, raced: list[str], barrier: Any, results: Any
) -> None:
    try:
        ids = [uuid.UUID(r) for r in raced]
        outcome = asyncio.run(_hammer(url, index, uuid.UUID(counted), ids, barrier))
    except BaseException:  # reported to the parent, which fails the test with it
        results.put({"error": traceback.format_exc()})
        raise
    results.put(outcome)


def _migrate_process(url: str, barrier: Any, results: Any) -> None:
    try:
        barrier.wait(TIMEOUT)
        migrate(url)
    except BaseException:
        results.put({"error": traceback.format_exc()})
        raise
    results.put({})


def _run(target: Any, argument_sets: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Run ``target(*arguments, barrier, results)`` in one spawned process per argument set."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(len(argument_sets)), context.Queue()
    processes = [
        context.Process(target=target, args=(*arguments, barrier, results))
        for arguments in argument_sets
    ]
    for process in processes:
        process.start()
    outcomes = []
    try:
        for _ in processes:
            outcomes.append(results.get(timeout=TIMEOUT))
    except queue.Empty:
        outcomes.append({"error": "a process did not report in time"})
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
    errors = [o["error"] for o in outcomes if "error" in o]
    assert not errors, "\n".join(errors)
    return outcomes


async def _prepare(url: str) -> tuple[OperationRecord, list[OperationRecord]]:
    database = Database.from_url(url)
    store = SqlStore(database)
    counted = _operation(OperationStatus.RUNNING)
    raced = [_operation() for _ in range(RACED_OPERATIONS)]
    for record in (counted, *raced):
        await store.add(record)
    await database.close()
    return counted, raced


async def _inspect(url: str, counted: uuid.UUID, raced: list[uuid.UUID]) -> dict[str, Any]:
    database = Database.from_url(url)
    store, events = SqlStore(database), SqlEventStore(database)
    try:
        return {
            "counted": await store.get(counted),
            "rows": (await store.page(RowQuery(counted, page_size=1))).total_count,
            "recounted": await store.counts(counted),
            "raced": [await store.get(operation_id) for operation_id in raced],
            "events": await events.read(after=0, limit=10_000),
        }
    finally:
        await database.close()


def test_two_processes_share_one_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    migrate(url)
    counted, raced = asyncio.run(_prepare(url))
    raced_ids = [str(r.id) for r in raced]

    outcomes = _run(
        _hammer_process, [(url, i, str(counted.id), raced_ids) for i in range(PROCESSES)]
    )

    claims = [c for o in outcomes for c in o["claimed"]]
    failures = [f for o in outcomes for f in o["failed"]]
    assert sorted(claims) == sorted(raced_ids), "each operation is claimed exactly once"
    assert sorted(failures) == sorted(raced_ids), "each transition race has one winner"

    found = asyncio.run(_inspect(url, counted.id, [r.id for r in raced]))
    total = PROCESSES * BATCHES * BATCH_SIZE
    assert found["rows"] == total
    assert found["counted"].processed_rows == found["counted"].successful_rows == total
    assert found["recounted"].processed == total
    assert all(r.status is OperationStatus.FAILED and r.version == 2 for r in found["raced"])
    sequences = [e.sequence for e in found["events"]]
    appended = PROCESSES * CLAIMERS_PER_PROCESS * RACED_OPERATIONS * 2
    # One StatusChanged per claim and one Failed per failure: only the winners' events.
    assert len(sequences) == len(set(sequences)) == appended + 2 * RACED_OPERATIONS
    assert sequences == sorted(sequences)


def test_two_processes_migrating_a_new_file_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/dir/fresh.db"

    _run(_migrate_process, [(url,), (url,)])

    migrate(url)  # still at head: a no-op
    counted, _ = asyncio.run(_prepare(url))
    assert counted.status is OperationStatus.RUNNING
