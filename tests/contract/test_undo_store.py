"""``OperationStore.add_undo``: one undo per operation, only of a finished one, atomically."""

from __future__ import annotations

import asyncio

from bulkops.storage.records import ActiveLimit, LimitReached, UndoRefused
from bulkops.storage.states import OperationStatus
from tests.contract.conftest import MakeOperation, Stores


async def test_an_undo_is_stored_and_named_on_the_operation_it_undoes(
    stores: Stores, make_operation: MakeOperation
) -> None:
    original = make_operation(status=OperationStatus.COMPLETED)
    await stores.operations.add(original, [])
    undo = make_operation(undo_of=original.id)
    assert await stores.operations.add_undo(undo, []) is None
    stored_undo = await stores.operations.get(undo.id)
    assert stored_undo is not None and stored_undo.undo_of == original.id
    stored = await stores.operations.get(original.id)
    assert stored is not None and stored.undone_by == undo.id and stored.undo_of is None

    second = make_operation(undo_of=original.id)
    refused = await stores.operations.add_undo(second, [])
    assert isinstance(refused, UndoRefused)
    assert refused.original is not None and refused.original.undone_by == undo.id
    assert await stores.operations.get(second.id) is None


async def test_an_unfinished_or_unknown_operation_is_not_undone(
    stores: Stores, make_operation: MakeOperation
) -> None:
    running = make_operation(status=OperationStatus.RUNNING)
    await stores.operations.add(running, [])
    undo = make_operation(undo_of=running.id)
    refused = await stores.operations.add_undo(undo, [])
    assert isinstance(refused, UndoRefused)
    assert refused.original is not None and refused.original.status is OperationStatus.RUNNING
    assert await stores.operations.get(undo.id) is None

    ghost = make_operation()
    lost = await stores.operations.add_undo(make_operation(undo_of=ghost.id), [])
    assert lost == UndoRefused(None)


async def test_two_concurrent_undos_store_one(
    stores: Stores, make_operation: MakeOperation
) -> None:
    original = make_operation(status=OperationStatus.CANCELLED)
    await stores.operations.add(original, [])
    undos = [make_operation(undo_of=original.id) for _ in range(4)]
    results = await asyncio.gather(*(stores.operations.add_undo(u, []) for u in undos))
    assert sum(result is None for result in results) == 1
    winner = next(u for u, result in zip(undos, results, strict=True) if result is None)
    stored = await stores.operations.get(original.id)
    assert stored is not None and stored.undone_by == winner.id


async def test_the_active_limit_refuses_an_undo(
    stores: Stores, make_operation: MakeOperation
) -> None:
    original = make_operation(status=OperationStatus.COMPLETED, tenant="acme")
    await stores.operations.add(original, [])
    await stores.operations.add(make_operation(tenant="acme"), [])  # Pending: active
    undo = make_operation(undo_of=original.id, tenant="acme")
    refused = await stores.operations.add_undo(undo, [], limit=ActiveLimit(1))
    assert refused == LimitReached(1)
    stored = await stores.operations.get(original.id)
    assert stored is not None and stored.undone_by is None
