"""ChunkStore contract: every backend splits, claims, renews and ends chunks alike."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import cast

from bulkops.storage import lifecycle
from bulkops.storage.ports import ChunkStore
from bulkops.storage.records import ChunkRecord, Fence, OperationRecord, ProgressDelta
from bulkops.storage.states import ChunkState, OperationStatus
from tests.contract.conftest import BASE_TIME, MakeOperation, MakeRow, Stores

NOW = BASE_TIME + timedelta(hours=1)
FRESH = NOW - timedelta(seconds=30)  # heartbeats older than this are stale


def chunks_of(stores: Stores) -> ChunkStore:
    return cast(ChunkStore, stores.operations)  # one object implements every port


async def split_operation(
    stores: Stores, make_operation: MakeOperation, parts: int = 3, name: str = "import-users"
) -> OperationRecord:
    """A Running operation claimed by ``w0`` and split into ``parts`` chunks of 10 rows."""
    op = make_operation(operation_name=name)
    await stores.operations.add(op)
    claimed = await stores.operations.apply(lifecycle.claim(op, "w0", NOW))
    assert claimed is not None
    chunks = [ChunkRecord(op.id, i, 1 + 10 * i, 10, 100 * i) for i in range(parts)]
    split = await chunks_of(stores).split(lifecycle.split(claimed, 10 * parts, parts, NOW), chunks)
    assert split is not None
    return split


async def test_split_hands_the_operation_to_its_chunks(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await split_operation(stores, make_operation)

    assert op.status is OperationStatus.RUNNING and op.worker_id is None and op.total_rows == 30
    chunk = await chunks_of(stores).get_chunk(op.id, 2)
    assert chunk == ChunkRecord(op.id, 2, 21, 10, 200)
    assert await chunks_of(stores).get_chunk(op.id, 3) is None


async def test_a_split_with_a_stale_version_writes_nothing(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = make_operation()
    await stores.operations.add(op)
    claimed = await stores.operations.apply(lifecycle.claim(op, "w0", NOW))
    assert claimed is not None
    stale = lifecycle.split(claimed, 10, 1, NOW)
    moved = await stores.operations.apply(lifecycle.release(claimed, NOW))  # version moves on
    assert moved is not None

    assert await chunks_of(stores).split(stale, [ChunkRecord(op.id, 0, 1, 10, 0)]) is None
    assert await chunks_of(stores).get_chunk(op.id, 0) is None


async def test_claims_take_pending_chunks_in_order_and_never_twice(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await split_operation(stores, make_operation)
    chunks = chunks_of(stores)
    assert await chunks.chunk_work(["IMPORT-users"], FRESH) == 3

    claims = await asyncio.gather(
        *(chunks.claim_chunk(["import-users"], f"w{n}", NOW, FRESH) for n in range(5))
    )

    got = [claim for claim in claims if claim is not None]
    assert sorted(claim.index for claim in got) == [0, 1, 2]
    assert len({claim.worker_id for claim in got}) == 3
    assert all(c.state is ChunkState.RUNNING and c.version == 1 for c in got)
    assert all(c.heartbeat_at == NOW and c.resume_count == 0 for c in got)
    assert await chunks.chunk_work(["import-users"], FRESH) == 0
    assert await chunks.claim_chunk(["import-users"], "w9", NOW, FRESH) is None
    assert op.id == got[0].operation_id


async def test_chunk_work_leaves_out_the_excluded_operations(
    stores: Stores, make_operation: MakeOperation
) -> None:
    first = await split_operation(stores, make_operation, parts=2)
    second = await split_operation(stores, make_operation, parts=3)
    chunks = chunks_of(stores)

    assert await chunks.chunk_work(["import-users"], FRESH, exclude={first.id}) == 3
    assert await chunks.chunk_work(["import-users"], FRESH, exclude={first.id, second.id}) == 0
    taken = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, exclude={second.id})
    assert taken is not None and taken.operation_id == first.id
    assert await chunks.chunk_work(["import-users"], FRESH, exclude={second.id}) == 1


async def test_only_chunks_of_served_running_operations_are_claimed(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await split_operation(stores, make_operation, parts=1)
    chunks = chunks_of(stores)
    assert await chunks.claim_chunk(["other-operation"], "w1", NOW, FRESH) is None
    assert await chunks.claim_chunk([], "w1", NOW, FRESH) is None
    current = await stores.operations.get(op.id)
    assert current is not None
    assert await stores.operations.apply(lifecycle.cancel(current, NOW)) is not None

    assert await chunks.chunk_work(["import-users"], FRESH) == 0
    assert await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH) is None


async def test_a_chunk_whose_holder_stopped_is_claimed_again(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await split_operation(stores, make_operation, parts=1)
    chunks = chunks_of(stores)
    old = NOW - timedelta(minutes=5)
    assert await chunks.claim_chunk(["import-users"], "gone", old, FRESH) is not None
    alive = await chunks.claim_chunk(["import-users"], "w2", NOW, old - timedelta(seconds=1))
    assert alive is None  # not stale yet by that measure

    taken = await chunks.claim_chunk(["import-users"], "w2", NOW, FRESH)

    assert taken is not None and taken.worker_id == "w2" and taken.resume_count == 1
    assert await chunks.heartbeat_chunks([(op.id, 0)], "gone", NOW) == set()
    assert await chunks.heartbeat_chunks([(op.id, 0), (op.id, 7)], "w2", NOW) == {(op.id, 0)}
    assert await chunks.heartbeat_chunks([], "w2", NOW) == set()
    assert await chunks.end_chunk(op.id, 0, "gone", done=True) is None


async def test_a_live_holders_chunk_is_taken_only_past_its_longer_bound(
    stores: Stores, make_operation: MakeOperation
) -> None:
    await split_operation(stores, make_operation, parts=2)
    chunks = chunks_of(stores)
    late = NOW - timedelta(minutes=2)  # stale by FRESH, not by the live holders' bound
    live = await chunks.claim_chunk(["import-users"], "busy", late, late)
    dead = await chunks.claim_chunk(["import-users"], "gone", late, late)
    assert live is not None and dead is not None and live.index != dead.index
    patient = NOW - timedelta(minutes=5)
    alive = {"busy", "other"}

    assert await chunks.chunk_work(["import-users"], FRESH, alive, patient) == 1
    taken = await chunks.claim_chunk(
        ["import-users"], "w1", NOW, FRESH, alive=alive, alive_before=patient
    )
    assert taken is not None and taken.index == dead.index and taken.resume_count == 1
    assert await chunks.chunk_work(["import-users"], FRESH, alive, patient) == 0
    kept = await chunks.claim_chunk(
        ["import-users"], "w2", NOW, FRESH, alive=alive, alive_before=patient
    )
    assert kept is None  # its holder is alive: its heartbeat is late, not stopped
    assert await chunks.claim_chunk(["import-users"], "w2", NOW, FRESH, alive=alive) is None

    hung = NOW - timedelta(minutes=1)  # a bound its heartbeat is older than: hung
    assert await chunks.chunk_work(["import-users"], FRESH, alive, hung) == 1
    over = await chunks.claim_chunk(
        ["import-users"], "w2", NOW, FRESH, alive=alive, alive_before=hung
    )
    assert over is not None and over.index == live.index and over.worker_id == "w2"


async def test_ending_chunks_counts_those_left_and_finds_finished_splits(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await split_operation(stores, make_operation, parts=2)
    chunks = chunks_of(stores)
    first = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH)
    second = await chunks.claim_chunk(["import-users"], "w2", NOW, FRESH)
    assert first is not None and second is not None

    assert await chunks.end_chunk(op.id, first.index, "w1", done=False) == 2  # handed back
    back = await chunks.get_chunk(op.id, first.index)
    assert back is not None and back.state is ChunkState.PENDING and back.worker_id is None
    again = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH)
    assert again is not None and again.index == first.index
    assert await chunks.finished_splits() == []
    assert await chunks.end_chunk(op.id, first.index, "w1", done=True) == 1
    assert await chunks.end_chunk(op.id, second.index, "w2", done=True) == 0
    assert list(await chunks.finished_splits()) == [op.id]


async def test_saves_are_fenced_to_the_chunks_holder(
    stores: Stores, make_operation: MakeOperation, make_row: MakeRow
) -> None:
    op = await split_operation(stores, make_operation, parts=1)
    chunks = chunks_of(stores)
    assert await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH) is not None
    row = make_row(op.id, 1)

    assert (
        await stores.rows.save(op.id, [row], ProgressDelta(1, 1, 0), fence=Fence("w2", 0)) is None
    )
    held = await stores.rows.save(op.id, [row], ProgressDelta(1, 1, 0), fence=Fence("w1", 0))

    assert held is OperationStatus.RUNNING
    current = await stores.operations.get(op.id)
    assert current is not None and current.processed_rows == 1


async def test_claims_skip_the_excluded_operations(
    stores: Stores, make_operation: MakeOperation
) -> None:
    first = await split_operation(stores, make_operation, parts=2)
    second = await split_operation(stores, make_operation, parts=1)
    chunks = chunks_of(stores)

    got = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, exclude={first.id})

    assert got is not None and got.operation_id == second.id
    assert await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, exclude={first.id}) is None
    assert await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH) is not None


async def test_claims_among_named_operations_take_only_theirs(
    stores: Stores, make_operation: MakeOperation
) -> None:
    first = await split_operation(stores, make_operation, parts=1)
    second = await split_operation(stores, make_operation, parts=2)
    chunks = chunks_of(stores)

    got = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, among={second.id})

    assert got is not None and got.operation_id == second.id  # not the older one's
    assert await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, among=set()) is None
    again = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, among={second.id})
    assert again is not None and again.operation_id == second.id
    assert await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, among={second.id}) is None
    left = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH)
    assert left is not None and left.operation_id == first.id


async def test_a_holders_stale_chunks_are_handed_back_but_fresh_and_kept_ones(
    stores: Stores, make_operation: MakeOperation
) -> None:
    op = await split_operation(stores, make_operation, parts=4)
    store = chunks_of(stores)
    old = FRESH - timedelta(seconds=60)
    for worker, at in (("w1", old), ("w1", NOW), ("w2", old), ("w1", old)):  # chunks 0-3
        claimed = await store.claim_chunk(["import-users"], worker, at, old - timedelta(days=1))
        assert claimed is not None

    assert await store.hand_back_stale_chunks("w1", FRESH, keep=[(op.id, 3)]) == [(op.id, 0)]
    handed = await store.get_chunk(op.id, 0)
    assert handed is not None and (handed.state, handed.worker_id) == (ChunkState.PENDING, None)
    assert await store.hand_back_stale_chunks("w1", FRESH, keep=[(op.id, 3)]) == []
    for index, holder in ((1, "w1"), (2, "w2"), (3, "w1")):  # fresh, another's, kept
        chunk = await store.get_chunk(op.id, index)
        assert chunk is not None and (chunk.state, chunk.worker_id) == (ChunkState.RUNNING, holder)
