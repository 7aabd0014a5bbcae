"""Backends that are down, slow or flapping; readiness; start-up checks; disconnects."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import bulkops as bo
from bulkops.gateway.registry import DuplicateOperationError
from tests.gateway import gateway_operations as gops
from tests.gateway.conftest import (
    BackendFactory,
    BackendServer,
    GatewayFactory,
    create,
    wait_until,
)


async def test_a_backend_that_is_down_contributes_nothing_and_the_rest_is_served(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, http_retry_count=0)
    c = trio[2]
    ids = {backend.name: await create(gateway, gops.OPERATION_OF[backend.name]) for backend in trio}
    await c.stop()

    listing = (await gateway.get("/api/bulks")).json()
    assert {i["id"] for i in listing["items"]} == {ids["a"], ids["b"]}
    assert listing["totalCount"] == 2
    names = [d["name"] for d in (await gateway.get("/api/operations")).json()]
    assert "gamma-import" not in names and "alpha-import" in names
    assert (await gateway.get(f"/api/bulks/{ids['a']}/status")).status_code == 200

    unreachable = await gateway.get(f"/api/bulks/{ids['c']}/status")
    assert unreachable.status_code == 502
    assert unreachable.json()["error"].startswith("Backend 'c' is unreachable")
    create_on_c = await gateway.post(
        "/api/bulks",
        data={"operationName": "gamma-import"},
        files={"file": ("rows.csv", b"name\nx\n", "text/csv")},
    )
    assert create_on_c.status_code == 502 and "'c'" in create_on_c.json()["error"]


async def test_an_uncached_id_while_a_backend_is_down_is_503_not_404(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    c = trio[2]
    async with c.client() as direct:
        on_c = await create(direct, "gamma-import")
    await c.stop()
    gateway = await make_gateway(trio, http_retry_count=0)
    response = await gateway.get(f"/api/bulks/{on_c}")
    assert response.status_code == 503
    assert "unavailable: c" in response.json()["error"]


async def test_a_slow_backend_is_left_out_after_the_fan_out_timeout(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, fan_out_timeout_per_backend=5)
    b = trio[1]
    on_a = await create(gateway, "alpha-import")
    await create(gateway, "beta-import")
    b.faults.delay = 120
    listing = (await gateway.get("/api/bulks")).json()
    assert [i["id"] for i in listing["items"]] == [on_a]
    # The slow backend's call was cancelled, not left running.
    await wait_until(lambda: _abandoned(b, "/api/bulks"), what="the slow call to be dropped")


async def _abandoned(backend: BackendServer, path: str) -> bool:
    return path in backend.faults.abandoned


async def test_idempotent_requests_are_retried_and_others_are_not(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, http_retry_count=2)
    a = trio[0]
    operation_id = await create(gateway, "alpha-import")
    status = f"/api/bulks/{operation_id}/status"
    a.faults.fail_next = 2
    retried = await gateway.get(status)
    assert retried.status_code == 200 and a.faults.hits(status) == 2 + 1
    a.faults.fail_next = 1
    cancel = await gateway.post(f"/api/bulks/{operation_id}/cancel")
    assert cancel.status_code == 503 and cancel.json() == {"error": "Injected failure"}
    assert a.faults.hits(f"/api/bulks/{operation_id}/cancel", "POST") == 1
    a.faults.fail_next = 5
    exhausted = await gateway.get(status)  # three attempts, then the last answer is relayed
    assert exhausted.status_code == 503 and a.faults.hits(status) == 3 + 3


async def test_a_flapping_backend_opens_its_circuit_then_closes_it(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(
        trio,
        http_retry_count=0,
        circuit_breaker_failures=3,
        circuit_breaker_break_duration=5,
    )
    a = trio[0]
    operation_id = await create(gateway, "alpha-import")
    status = f"/api/bulks/{operation_id}/status"
    a.faults.fail_next = 1000
    for _ in range(3):
        assert (await gateway.get(status)).status_code == 503
    assert a.faults.hits(status) == 3
    refused = await gateway.get(status)  # open: refused without reaching the backend
    assert refused.status_code == 503 and "circuit open" in refused.json()["error"]
    assert a.faults.hits(status) == 3
    ready = (await gateway.get("/health/ready")).json()
    assert ready["status"] == "Degraded"
    # Open, or half-open already if the break has passed on a busy machine.
    assert ready["checks"]["bulk-backends"]["backends"]["a"]["circuit"] != "closed"

    a.faults.fail_next = 0  # the backend recovers; after the break one trial call passes

    async def answered() -> bool:
        return (await gateway.get(status)).status_code == 200

    await wait_until(answered, timeout=10, what="the circuit to let a trial call through")
    ready = (await gateway.get("/health/ready")).json()
    assert ready["status"] == "Healthy"
    assert ready["checks"]["bulk-backends"]["backends"]["a"]["circuit"] == "closed"


async def test_a_failed_trial_reopens_the_circuit(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(
        trio, http_retry_count=0, circuit_breaker_failures=1, circuit_breaker_break_duration=3
    )
    a = trio[0]
    operation_id = await create(gateway, "alpha-import")
    status = f"/api/bulks/{operation_id}/status"
    a.faults.fail_next = 1000
    assert (await gateway.get(status)).status_code == 503  # opens

    async def trial_reached_backend() -> bool:
        await gateway.get(status)
        return a.faults.hits(status) == 2

    await wait_until(trial_reached_backend, timeout=10, what="a trial call")
    assert "circuit open" in (await gateway.get(status)).json()["error"]
    assert a.faults.hits(status) == 2


async def test_readiness_is_healthy_degraded_then_unhealthy(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, http_retry_count=0)
    healthy = await gateway.get("/health/ready")
    assert healthy.status_code == 200
    body = healthy.json()
    assert body["status"] == "Healthy"
    check = body["checks"]["bulk-backends"]
    assert check["status"] == "Healthy" and check["tags"] == ["ready"]
    assert {name: b["status"] for name, b in check["backends"].items()} == {
        "a": "Healthy",
        "b": "Healthy",
        "c": "Healthy",
    }
    await trio[2].stop()
    degraded = await gateway.get("/health/ready")
    assert degraded.status_code == 200 and degraded.json()["status"] == "Degraded"
    assert degraded.json()["checks"]["bulk-backends"]["backends"]["c"]["status"] == "Unhealthy"
    await trio[0].stop()
    await trio[1].stop()
    unhealthy = await gateway.get("/health/ready")
    assert unhealthy.status_code == 503 and unhealthy.json()["status"] == "Unhealthy"
    live = await gateway.get("/health/live")  # liveness runs no checks
    assert live.status_code == 200 and live.json() == {"status": "Healthy"}


async def test_a_gateway_without_backends_is_unhealthy(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway({})
    ready = await gateway.get("/health/ready")
    assert ready.status_code == 503
    check = ready.json()["checks"]["bulk-backends"]
    assert check["status"] == "Unhealthy" and "No backends" in check["error"]
    assert (await gateway.get("/api/operations")).json() == []


async def test_duplicate_operation_names_stop_the_gateway_at_start(
    make_backend: BackendFactory,
) -> None:
    first = await make_backend("a")
    second = await make_backend("twin", [gops.GammaImport, gops.AlphaImport])
    app = bo.create_gateway({"a": first.url, "twin": second.url})
    with pytest.raises(DuplicateOperationError, match="'alpha-import' is served by backends"):
        async with app.router.lifespan_context(app):
            pass


async def test_an_unreachable_backend_does_not_stop_the_start(
    make_backend: BackendFactory, make_gateway: GatewayFactory
) -> None:
    a = await make_backend("a")
    gone = await make_backend("c")
    await gone.stop()
    gateway = await make_gateway([a, gone], http_retry_count=0)
    assert [d["name"] for d in (await gateway.get("/api/operations")).json()] == ["alpha-import"]


async def test_a_caller_that_leaves_cancels_the_backend_calls(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    a = trio[0]
    operation_id = await create(gateway, "alpha-import")
    a.faults.delay = 120
    for path in (f"/api/bulks/{operation_id}/status", "/api/bulks"):
        arrived = a.faults.hits(path)
        call = asyncio.create_task(gateway.get(path))

        async def reached_backend(path: str = path, arrived: int = arrived) -> bool:
            return a.faults.hits(path) > arrived

        await wait_until(reached_backend, what=f"{path} to reach the backend")
        call.cancel()  # the caller gives up: its connection to the gateway closes
        with contextlib.suppress(asyncio.CancelledError):
            await call

        async def dropped(path: str = path) -> bool:
            return path in a.faults.abandoned

        await wait_until(dropped, what=f"the backend call for {path} to be dropped")


async def test_the_registry_is_refreshed_on_its_interval(
    make_backend: BackendFactory, make_gateway: GatewayFactory
) -> None:
    a = await make_backend("a")
    await make_gateway([a], registry_refresh_interval=0.2)
    start = a.faults.hits("/api/operations")

    async def refreshed() -> bool:
        return a.faults.hits("/api/operations") >= start + 2

    await wait_until(refreshed, what="two refreshes")


async def test_a_request_routed_to_a_backend_that_does_not_answer_times_out(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, http_timeout=1, http_retry_count=0)
    a = trio[0]
    operation_id = await create(gateway, "alpha-import")
    a.faults.delay = 120
    response = await gateway.get(f"/api/bulks/{operation_id}/status")
    assert response.status_code == 504
    assert response.json() == {"error": "Backend 'a' timed out"}
