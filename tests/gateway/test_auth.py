"""Credentials towards the backends: the caller's bearer token, or an outgoing hook's."""

from __future__ import annotations

import httpx

from tests.gateway.conftest import BackendServer, GatewayFactory, create

BEARER = {"Authorization": "Bearer caller-token"}


def _authorizations(backend: BackendServer, path: str) -> list[str | None]:
    return [h.get("authorization") for _, p, _, h in backend.faults.requests if p == path]


async def test_the_callers_bearer_token_is_forwarded_by_default(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "beta-import")
    await gateway.get("/api/bulks", headers=BEARER)
    await gateway.get(f"/api/bulks/{operation_id}", headers=BEARER)
    await gateway.get("/api/bulks", headers={"Authorization": "Basic dXNlcjpwdw=="})
    b = trio[1]
    assert _authorizations(b, "/api/bulks")[-2:] == ["Bearer caller-token", None]
    assert _authorizations(b, f"/api/bulks/{operation_id}") == ["Bearer caller-token"]
    assert all(h.get("x-forwarded-for") for _, _, _, h in b.faults.requests[-2:])


async def test_with_forwarding_off_the_token_stays_at_the_gateway(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, forward_bearer_token=False)
    operation_id = await create(gateway, "alpha-import")
    await gateway.get("/api/bulks", headers=BEARER)
    await gateway.get(f"/api/bulks/{operation_id}/events", headers=BEARER)
    await gateway.post(f"/api/bulks/{operation_id}/cancel", headers=BEARER)
    for backend in trio:
        assert all(h.get("authorization") is None for _, _, _, h in backend.faults.requests)


async def test_an_outgoing_hook_sets_a_credential_that_retries_carry_too(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    seen: list[tuple[str, str]] = []

    async def service_credential(request: httpx.Request, backend: str) -> None:
        seen.append((request.method, backend))
        request.headers["Authorization"] = f"Bearer service-token-for-{backend}"

    gateway = await make_gateway(
        trio, outgoing=[service_credential], forward_bearer_token=False, http_retry_count=2
    )
    operation_id = await create(gateway, "alpha-import")
    a = trio[0]
    a.faults.fail_next = 2  # the hook runs once; both retries still carry its credential
    hooked = len(seen)
    status = f"/api/bulks/{operation_id}/status"
    assert (await gateway.get(status, headers=BEARER)).status_code == 200
    assert seen[hooked:] == [("GET", "a")]
    assert _authorizations(a, status) == ["Bearer service-token-for-a"] * 3
    listed = len(trio[2].faults.requests)
    await gateway.get("/api/bulks")
    assert trio[2].faults.requests[listed][3]["authorization"] == "Bearer service-token-for-c"
    # Discovery at start went through the hook as well.
    assert _authorizations(trio[1], "/api/operations")[0] == "Bearer service-token-for-b"
