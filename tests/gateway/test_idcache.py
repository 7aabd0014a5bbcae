"""Unit: the operation-to-backend cache expires entries after their last use."""

from __future__ import annotations

from bulkops.gateway.idcache import IdCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_expires_ttl_after_it_was_stored() -> None:
    clock = Clock()
    cache = IdCache(60, clock=clock)
    cache.put("op-1", "a")
    clock.now = 59.9
    assert cache.get("op-1") == "a"
    clock.now = 59.9 + 60
    assert cache.get("op-1") is None
    assert len(cache) == 0


def test_every_hit_slides_the_expiry() -> None:
    clock = Clock()
    cache = IdCache(60, clock=clock)
    cache.put("op-1", "a")
    for minute in range(1, 10):  # polled every 50 s for 9 minutes: never expires
        clock.now = minute * 50
        assert cache.get("op-1") == "a"
    clock.now += 61
    assert cache.get("op-1") is None


def test_a_new_owner_replaces_the_old() -> None:
    cache = IdCache(60, clock=Clock())
    cache.put("op-1", "a")
    cache.put("op-1", "b")
    assert cache.get("op-1") == "b" and len(cache) == 1


def test_the_least_recently_used_entries_go_beyond_the_bound() -> None:
    cache = IdCache(60, max_entries=3, clock=Clock())
    for name in ("op-1", "op-2", "op-3"):
        cache.put(name, "a")
    assert cache.get("op-1") == "a"  # used: now the most recent
    cache.put("op-4", "b")
    assert cache.get("op-2") is None
    assert [cache.get(n) for n in ("op-1", "op-3", "op-4")] == ["a", "a", "b"]
    assert len(cache) == 3
