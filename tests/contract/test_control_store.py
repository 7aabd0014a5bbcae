"""Idempotency keys and rate-limit starts: the same behaviour on every adapter."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from bulkops.storage.records import IdempotencyKey, KeyInUse
from tests.contract.conftest import BASE_TIME, MakeOperation, Stores


def key(fingerprint: str = "f1", name: str = "k", principal: str = "ann") -> IdempotencyKey:
    return IdempotencyKey(principal, name, fingerprint, BASE_TIME - timedelta(days=1))


async def test_a_used_key_answers_its_first_operation_and_adds_nothing(
    stores: Stores, make_operation: MakeOperation
) -> None:
    first, second = make_operation(), make_operation()
    assert await stores.operations.add(first, [], idempotency=key()) is None

    used = await stores.operations.add(second, [], idempotency=key("f2"))

    assert used == KeyInUse(first.id, "f1")
    assert await stores.operations.get(second.id) is None
    other_principal = await stores.operations.add(second, [], idempotency=key(principal="bob"))
    assert other_principal is None  # keys are scoped to the principal


async def test_a_key_in_use_is_found_without_being_recorded(
    stores: Stores, make_operation: MakeOperation
) -> None:
    assert await stores.operations.key_in_use(key()) is None
    assert await stores.operations.key_in_use(key()) is None  # looking records nothing
    first = make_operation()
    await stores.operations.add(first, [], idempotency=key())
    assert await stores.operations.key_in_use(key("f2")) == KeyInUse(first.id, "f1")
    assert await stores.operations.key_in_use(key(principal="bob")) is None
    assert await stores.operations.key_in_use(key(name="other")) is None
    later = IdempotencyKey("ann", "k", "f1", first.created_at + timedelta(seconds=1))
    assert await stores.operations.key_in_use(later) is None  # expired


async def test_an_expired_key_is_used_again(stores: Stores, make_operation: MakeOperation) -> None:
    old = make_operation(created_at=BASE_TIME - timedelta(days=3))
    await stores.operations.add(old, [], idempotency=key())
    fresh = make_operation()
    assert await stores.operations.add(fresh, [], idempotency=key("f2")) is None
    again = await stores.operations.add(make_operation(), [], idempotency=key("f3"))
    assert again == KeyInUse(fresh.id, "f2")


async def test_concurrent_adds_with_one_key_add_one_operation(
    stores: Stores, make_operation: MakeOperation
) -> None:
    records = [make_operation() for _ in range(5)]
    results = await asyncio.gather(
        *(stores.operations.add(r, [], idempotency=key()) for r in records)
    )
    added = [r for r, result in zip(records, results, strict=True) if result is None]
    assert len(added) == 1
    assert all(r == KeyInUse(added[0].id, "f1") for r in results if r is not None)


async def test_rate_limit_starts_keep_a_sliding_window(stores: Stores) -> None:
    limits = stores.operations
    granted = [await limits.acquire("op", 3, 1.0) for _ in range(3)]  # type: ignore[attr-defined]
    started = time.monotonic()
    refused = await limits.acquire("op", 3, 1.0)  # type: ignore[attr-defined]
    assert granted == [0, 0, 0]
    assert 0 < refused <= 1.0
    assert await limits.acquire("other", 3, 1.0) == 0  # type: ignore[attr-defined]
    await asyncio.sleep(refused)  # the oldest start leaves the window
    assert await limits.acquire("op", 3, 1.0) == 0  # type: ignore[attr-defined]
    assert time.monotonic() - started >= refused
