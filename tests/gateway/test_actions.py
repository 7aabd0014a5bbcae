"""Bulk actions through a gateway: a new action goes to every backend, each of its ids is
routed to the backend that stores it, and the list merges them all."""

from __future__ import annotations

import uuid

from tests.gateway.conftest import (
    BackendFactory,
    BackendServer,
    GatewayFactory,
    create,
    wait_finished,
)


async def test_an_action_fans_out_and_its_ids_are_routed(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    alpha = await create(gateway, "alpha-import", "name\nx\n")
    beta = await create(gateway, "beta-import", "name\ny\n")
    for operation_id in (alpha, beta):
        await wait_finished(gateway, operation_id)
    body = {"action": "cancel", "filter": {"ids": [alpha, beta]}}

    preview = await gateway.post("/api/actions", json={**body, "preview": True})
    assert preview.status_code == 200, preview.text
    assert preview.json()["matched"] == 2
    assert sorted(preview.json()["operationIds"]) == sorted([alpha, beta])
    empty = await gateway.post("/api/actions", json={"action": "cancel", "filter": {}})
    assert empty.status_code == 400 and "error" in empty.json()

    made = await gateway.post("/api/actions", json=body)
    assert made.status_code == 202, made.text
    action = made.json()
    assert made.headers["location"] == f"/api/actions/{action['id']}"
    every = action["actions"]
    assert sorted(part["backend"] for part in every) == ["a", "b", "c"]
    assert sum(part["matched"] for part in every) == 2
    assert action["id"] in {part["id"] for part in every} and action["matched"] == 1

    for part in every:  # each id reaches its own backend, cached or not
        gateway_copy = await make_gateway(trio)
        for client in (gateway, gateway_copy):
            found = await client.get(f"/api/actions/{part['id']}")
            assert found.status_code == 200, found.text
            assert (found.json()["id"], found.json()["matched"]) == (part["id"], part["matched"])
    unknown = await gateway.get(f"/api/actions/{uuid.uuid4()}")
    assert unknown.status_code == 404
    cancelled = await gateway.post(f"/api/actions/{action['id']}/cancel")
    assert cancelled.status_code in (200, 409), cancelled.text

    listed = (await gateway.get("/api/actions", params={"pageSize": 2})).json()
    assert listed["totalCount"] == 3 and len(listed["items"]) == 2 and listed["hasNextPage"]
    rest = (await gateway.get("/api/actions", params={"pageSize": 2, "page": 2})).json()
    ids = {i["id"] for i in listed["items"]} | {i["id"] for i in rest["items"]}
    assert ids == {part["id"] for part in every}


async def test_an_action_names_the_backends_that_did_not_answer(
    make_backend: BackendFactory, make_gateway: GatewayFactory
) -> None:
    a = await make_backend("a")
    gone = await make_backend("c")
    gateway = await make_gateway([a, gone], http_retry_count=0)
    alpha = await create(gateway, "alpha-import", "name\nx\n")
    await wait_finished(gateway, alpha)
    await gone.stop()
    made = await gateway.post("/api/actions", json={"action": "retry", "filter": {"ids": [alpha]}})
    assert made.status_code == 202, made.text
    body = made.json()
    assert [part["backend"] for part in body["actions"]] == ["a"]
    assert body["unavailableBackends"] == ["c"] and body["matched"] == 1
