"""A gateway over secured backends: every route answers an unauthenticated caller 401 with
the backends' challenge, a create heals a refused start-up discovery, and ``/metrics``."""

from __future__ import annotations

import json

import pytest

from tests.gateway.conftest import BackendFactory, BackendServer, GatewayFactory
from tests.integration.test_tenants import ADMIN, TOKENS

SECURED = {"auth_tokens": json.dumps(TOKENS)}
BEARER = {"Authorization": f"Bearer {ADMIN}"}
FORM = {"operationName": "alpha-import", "metadata": "{}"}
FILE = {"file": ("rows.csv", b"name\nx\n", "text/csv")}


@pytest.fixture
async def secured(make_backend: BackendFactory) -> list[BackendServer]:
    return [await make_backend("a", **SECURED), await make_backend("b", **SECURED)]


async def test_a_create_heals_a_start_up_discovery_the_backends_refused(
    secured: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(secured)
    # Start-up discovery carried no credential: both backends refused it.
    assert all(b.faults.hits("/api/operations") == 1 for b in secured)
    created = await gateway.post("/api/bulks", data=FORM, files=FILE, headers=BEARER)
    assert created.status_code == 201, created.text
    again = await gateway.post(
        "/api/bulks", data={**FORM, "operationName": "beta-import"}, files=FILE, headers=BEARER
    )
    assert again.status_code == 201, again.text
    unknown = await gateway.post(
        "/api/bulks", data={**FORM, "operationName": "nope"}, files=FILE, headers=BEARER
    )
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/bulks"),
        ("GET", "/api/operations"),
        ("GET", "/api/events"),
        ("GET", "/api/operations/alpha-import/template"),
        ("GET", "/api/bulks/00000000-0000-4000-8000-000000000000"),
        ("POST", "/api/bulks"),
        ("POST", "/api/bulks/validate"),
        ("GET", "/metrics"),
    ],
)
async def test_an_unauthenticated_request_is_401_with_a_bearer_challenge(
    secured: list[BackendServer], make_gateway: GatewayFactory, method: str, path: str
) -> None:
    gateway = await make_gateway(secured)
    upload = {"data": FORM, "files": FILE} if method == "POST" else {}
    response = await gateway.request(method, path, **upload)  # type: ignore[arg-type]
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_the_gateway_serves_its_metrics(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    await gateway.get("/api/operations")
    await trio[2].stop()
    await gateway.get("/api/operations")
    response = await gateway.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    counted = 'bulkops_gateway_http_requests_total{method="GET",route="/api/operations",'
    assert counted + 'status="200"}' in text
    assert 'bulkops_gateway_backend_circuit{backend="a",state="closed"} 1.0' in text
