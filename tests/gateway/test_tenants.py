"""Tenants through the gateway: it forwards the caller's token, the backends scope, and the
merged list and feed keep every caller's view apart."""

from __future__ import annotations

import json
from typing import Any

import httpx

from bulkops.gateway.feed import CallerFeeds
from tests.gateway.conftest import BackendFactory, GatewayFactory, wait_until
from tests.integration.test_tenants import ACME, ADMIN, ANY_BODY, GLOBEX, TOKENS, _requests


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def create_as(gateway: httpx.AsyncClient, token: str, operation: str) -> str:
    response = await gateway.post(
        "/api/bulks",
        data={"operationName": operation, "metadata": "{}"},
        files={"file": ("rows.csv", b"name\nx\nfail-y\n", "text/csv")},
        headers=bearer(token),
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


async def finished(gateway: httpx.AsyncClient, token: str, operation_id: str) -> None:
    async def done() -> bool:
        answer = await gateway.get(f"/api/bulks/{operation_id}/status", headers=bearer(token))
        return answer.json().get("status") == "CompletedWithErrors"

    await wait_until(done, what=f"{operation_id} to finish")


async def events_of(gateway: httpx.AsyncClient, token: str, **query: Any) -> list[dict[str, Any]]:
    answer = await gateway.get("/api/events", params=query, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()
    return found


async def test_two_tenants_share_a_gateway_without_a_trace_of_each_other(
    make_backend: BackendFactory, make_gateway: GatewayFactory
) -> None:
    secured = {"auth_tokens": json.dumps(TOKENS)}
    backends = [await make_backend("a", **secured), await make_backend("b", **secured)]
    gateway = await make_gateway(backends)
    # The backends refused the gateway's discovery at start (it has no credential); a
    # caller's discovery teaches it who serves what.
    assert (await gateway.get("/api/operations", headers=bearer(ACME))).status_code == 200
    acme = [await create_as(gateway, ACME, op) for op in ("alpha-import", "beta-import")]
    globex = [await create_as(gateway, GLOBEX, op) for op in ("beta-import", "alpha-import")]
    for operation_id in acme:
        await finished(gateway, ACME, operation_id)
    for operation_id in globex:
        await finished(gateway, GLOBEX, operation_id)

    async def listed(token: str) -> set[str]:
        body = (await gateway.get("/api/bulks", headers=bearer(token))).json()
        return {item["id"] for item in body["items"]}

    assert await listed(ACME) == set(acme)
    assert await listed(GLOBEX) == set(globex)
    assert await listed(ADMIN) == {*acme, *globex}
    # acme reads the merged feed first: a log shared by callers would now hold acme's
    # events and have moved past globex's.
    assert {e["operationId"] for e in await events_of(gateway, ACME)} == set(acme)
    seen = await events_of(gateway, GLOBEX)
    assert {e["operationId"] for e in seen} == set(globex)
    assert {e["operationId"] for e in await events_of(gateway, ADMIN)} == {*acme, *globex}
    # Following from globex's cursor: its new operation shows, acme's new one does not.
    cursor = seen[-1]["sequence"]
    later_acme = await create_as(gateway, ACME, "alpha-import")
    later_globex = await create_as(gateway, GLOBEX, "beta-import")
    await finished(gateway, GLOBEX, later_globex)
    await finished(gateway, ACME, later_acme)
    followed = await events_of(gateway, GLOBEX, since=cursor)
    assert {e["operationId"] for e in followed} == {later_globex}
    # Every route of one operation, through the gateway, with acme's ids known to its
    # id cache: 404 for globex.
    document = (await gateway.get("/openapi/v1.json")).json()
    for method, path, names in _requests(document, acme[1]):
        if "id" in names:
            answer = await gateway.request(method, path, json=ANY_BODY, headers=bearer(GLOBEX))
            assert answer.status_code == 404, (method, path, answer.text)
    me = await gateway.get("/api/me", headers=bearer(GLOBEX))
    assert me.json() == {"name": "bob", "tenant": "globex"}


def test_each_credential_has_a_log_of_its_own_and_the_least_recent_is_dropped() -> None:
    feeds = CallerFeeds([], timeout=1, most=2)
    alice = [("authorization", "Bearer alice")]
    first = feeds.log_for(alice)
    assert feeds.log_for([("Authorization", "Bearer alice")]) is first
    anonymous = feeds.log_for([])
    assert anonymous is not first and feeds.log_for([("x-other", "1")]) is anonymous
    feeds.log_for(alice)  # alice read last: the anonymous log goes first
    feeds.log_for([("authorization", "Bearer bob")])
    assert feeds.log_for(alice) is first
    assert feeds.log_for([]) is not anonymous


async def test_the_active_limit_answers_through_the_gateway(
    make_backend: BackendFactory, make_gateway: GatewayFactory
) -> None:
    secured = {"auth_tokens": json.dumps(TOKENS), "tenant_max_active": 1, "role": "api"}
    gateway = await make_gateway([await make_backend("a", **secured)])
    assert (await gateway.get("/api/operations", headers=bearer(ACME))).status_code == 200
    await create_as(gateway, ACME, "alpha-import")
    refused = await gateway.post(
        "/api/bulks",
        data={"operationName": "alpha-import", "metadata": "{}"},
        files={"file": ("rows.csv", b"name\nx\n", "text/csv")},
        headers=bearer(ACME),
    )
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert "BULKOPS_TENANT_MAX_ACTIVE=1" in refused.json()["error"]
    await create_as(gateway, GLOBEX, "alpha-import")  # another tenant is not affected
