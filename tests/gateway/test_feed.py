"""The global event feed through the gateway: one cursor over every backend's events."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.gateway.conftest import (
    BackendFactory,
    BackendServer,
    GatewayFactory,
    create,
    wait_finished,
)


def _identity(event: dict[str, Any]) -> tuple[str, str, str, str]:
    return event["operationId"], event["type"], event["message"], event["timestamp"]


async def _native_feeds(backends: list[BackendServer]) -> list[tuple[str, str, str, str]]:
    events: list[tuple[str, str, str, str]] = []
    for backend in backends:
        async with backend.client() as direct:
            events += [_identity(e) for e in (await direct.get("/api/events?limit=1000")).json()]
    return events


async def _follow(gateway: httpx.AsyncClient, since: int, limit: int = 3) -> list[dict[str, Any]]:
    """Poll with the highest sequence seen, as a client does, until nothing new comes."""
    seen: list[dict[str, Any]] = []
    while batch := (
        await gateway.get("/api/events", params={"since": since, "limit": limit})
    ).json():
        seen += batch
        since = max(e["sequence"] for e in batch)
    return seen


async def test_polling_with_the_cursor_delivers_every_event_once(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    first = await create(gateway, "alpha-import", "name\nok\nfail-1\n")
    await wait_finished(gateway, first)
    adopted = (await gateway.get("/api/events")).json()  # a client's first poll: adopt
    assert [e["operationId"] for e in adopted] == [first] * len(adopted)
    cursor = max(e["sequence"] for e in adopted)

    # Now events arrive on several backends at once, some while the client polls.
    later = await asyncio.gather(
        *(
            create(gateway, name, "name\na\nfail-b\nc\n")
            for name in ("alpha-import", "beta-import", "gamma-import")
        )
    )
    polled = await _follow(gateway, cursor)
    for operation_id in later:
        await wait_finished(gateway, operation_id)
    polled += await _follow(gateway, max([cursor, *(e["sequence"] for e in polled)]))

    sequences = [e["sequence"] for e in polled]
    assert sequences == sorted(set(sequences))  # increasing: nothing twice
    everything = [_identity(e) for e in adopted + polled]
    assert sorted(everything) == sorted(await _native_feeds(trio))  # nothing skipped
    for operation_id in later:  # each backend's own order is kept
        types = [e["type"] for e in polled if e["operationId"] == operation_id]
        assert types[0] == "Created" and types[-1] == "Completed"


async def test_without_since_the_newest_events_come_oldest_first(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    for name in ("beta-import", "gamma-import"):
        await wait_finished(gateway, await create(gateway, name))
    everything = (await gateway.get("/api/events?limit=1000")).json()
    newest = (await gateway.get("/api/events?limit=2")).json()
    assert newest == everything[-2:]
    assert [e["type"] for e in newest][-1] == "Completed"
    bad = await gateway.get("/api/events?since=abc")
    assert bad.status_code == 400 and "since" in bad.json()["error"]


async def test_with_one_active_backend_the_sequences_are_its_own(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "gamma-import")
    await wait_finished(gateway, operation_id)
    async with trio[2].client() as direct:
        native = (await direct.get("/api/events")).json()
    assert (await gateway.get("/api/events")).json() == native
    own = (await gateway.get(f"/api/bulks/{operation_id}/events")).json()
    assert own == native  # the per-operation feed is the owner's, natively numbered


async def test_a_new_gateway_continues_the_cursor_of_an_old_one(
    make_backend: BackendFactory, make_gateway: GatewayFactory
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    old = await make_gateway([a, b])
    for name in ("alpha-import", "beta-import", "alpha-import"):
        await wait_finished(old, await create(old, name))
    cursor = max(e["sequence"] for e in (await old.get("/api/events?limit=1000")).json())

    new = await make_gateway([a, b])  # e.g. the gateway was restarted
    assert (await new.get("/api/events", params={"since": cursor})).json() == []
    operation_id = await create(new, "beta-import")
    await wait_finished(new, operation_id)
    fresh = (await new.get("/api/events", params={"since": cursor})).json()
    assert {e["operationId"] for e in fresh} == {operation_id}
    assert fresh[0]["type"] == "Created"
    assert min(e["sequence"] for e in fresh) > cursor


async def test_the_merged_feed_and_an_operations_feed_filter_by_actor(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "beta-import")
    await wait_finished(gateway, operation_id)
    everything = (await gateway.get("/api/events?limit=1000")).json()
    system = (await gateway.get("/api/events", params={"actor": "system", "limit": 1000})).json()
    assert system and system == [e for e in everything if e["actor"] == "system"]
    assert len(system) < len(everything)  # the create is its creator's
    own = await gateway.get(f"/api/bulks/{operation_id}/events", params={"actor": "system"})
    assert {e["actor"] for e in own.json()} == {"system"}
