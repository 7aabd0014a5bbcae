"""Every backend hands out work by priority first, then oldest first."""

from __future__ import annotations

from bulkops.storage import lifecycle
from bulkops.storage.records import ChunkRecord
from bulkops.storage.states import OperationStatus
from tests.contract.conftest import MakeOperation, Stores
from tests.contract.test_chunk_store import FRESH, NOW, chunks_of


async def test_claimable_lists_higher_priorities_first_then_the_oldest(
    stores: Stores, make_operation: MakeOperation
) -> None:
    old_low = make_operation(status=OperationStatus.PENDING, priority=-3)
    plain = make_operation(status=OperationStatus.PENDING)
    new_high = make_operation(status=OperationStatus.PENDING, priority=5)
    also_plain = make_operation(status=OperationStatus.PENDING)
    for record in (old_low, plain, new_high, also_plain):
        await stores.operations.add(record)

    found = await stores.operations.claimable(10)

    assert [r.id for r in found] == [new_high.id, plain.id, also_plain.id, old_low.id]
    assert [r.priority for r in found] == [5, 0, 0, -3]


async def test_a_chunk_of_a_higher_priority_is_claimed_first(
    stores: Stores, make_operation: MakeOperation
) -> None:
    split = []
    for priority in (0, 4):  # the older operation has the lower priority
        op = make_operation(operation_name="import-users", priority=priority)
        await stores.operations.add(op)
        claimed = await stores.operations.apply(lifecycle.claim(op, "w0", NOW))
        assert claimed is not None
        parts = [ChunkRecord(op.id, i, 1 + 10 * i, 10, -1) for i in range(2)]
        change = lifecycle.split(claimed, 20, 2, NOW)
        assert await chunks_of(stores).split(change, parts) is not None
        split.append(op.id)

    chunks = chunks_of(stores)
    first = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH)
    second = await chunks.claim_chunk(["import-users"], "w1", NOW, FRESH, exclude={split[1]})

    assert first is not None and first.operation_id == split[1]
    assert second is not None and second.operation_id == split[0]
