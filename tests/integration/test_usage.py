"""Usage and the rows-per-day quota over HTTP: a tenant's use by day, read by operators
(a tenant's principal sees its own), and a create that would pass the quota refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from bulkops.client import AsyncClient
from tests.integration.auth_support import bearer
from tests.integration.conftest import ClientFactory, wait_status

ACME, ACME_READER, GLOBEX, ADMIN = "acme-operate", "acme-read", "globex-operate", "admin-operate"
TOKENS = {
    ACME: {"role": "operate", "name": "alice", "tenant": "acme"},
    ACME_READER: {"role": "read", "name": "ann", "tenant": "acme"},
    GLOBEX: {"role": "operate", "name": "bob", "tenant": "globex"},
    ADMIN: {"role": "operate", "name": "root"},
}


def _rows(count: int) -> str:
    return "name,email\n" + "".join(f"r{n},r{n}@x.io\n" for n in range(count))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def service(request: pytest.FixtureRequest, make_client: ClientFactory) -> httpx.AsyncClient:
    overrides: dict[str, Any] = {
        "auth_tokens": json.dumps(TOKENS),
        "tenant_max_rows_per_day": 10,
    }
    if request.param == "postgres":
        overrides.update(database_url=request.getfixturevalue("empty_postgres_url"))
        overrides.update(migrate_on_start=False)
    return await make_client(**overrides)


async def _create(client: httpx.AsyncClient, token: str, rows: int) -> httpx.Response:
    return await client.post(
        "/api/bulks",
        data={"operationName": "record", "metadata": json.dumps({"requestedBy": "tests"})},
        files={"file": ("rows.csv", _rows(rows).encode(), "text/csv")},
        headers=bearer(token),
    )


async def _finish(client: httpx.AsyncClient, token: str, operation_id: str) -> None:
    client.headers.update(bearer(token))
    try:
        await wait_status(client, operation_id)
    finally:
        del client.headers["Authorization"]


async def test_a_create_past_the_rows_quota_is_429_with_retry_after(
    service: httpx.AsyncClient,
) -> None:
    first = await _create(service, ACME, 6)
    assert first.status_code == 201, first.text
    refused = await _create(service, ACME, 5)  # 6 + 5 > 10
    assert refused.status_code == 429, refused.text
    assert 0 < int(refused.headers["Retry-After"]) <= 86400
    assert "BULKOPS_TENANT_MAX_ROWS_PER_DAY" in refused.json()["error"]
    assert (await _create(service, ACME, 4)).status_code == 201  # 6 + 4 = 10: at the limit
    assert (await _create(service, GLOBEX, 10)).status_code == 201  # another tenant's own
    listed = await service.get("/api/bulks", headers=bearer(ACME))
    assert listed.json()["totalCount"] == 2  # nothing of the refused create was kept


async def test_usage_by_tenant_and_day(service: httpx.AsyncClient) -> None:
    acme = (await _create(service, ACME, 3)).json()["operationId"]
    globex = (await _create(service, GLOBEX, 2)).json()["operationId"]
    await _finish(service, ACME, acme)
    await _finish(service, GLOBEX, globex)
    today = datetime.now(UTC).date().isoformat()

    everyone = await service.get("/api/usage", headers=bearer(ADMIN))
    assert everyone.status_code == 200, everyone.text
    body = everyone.json()
    assert body["days"] == 30
    by_tenant = {item["tenant"]: item for item in body["items"]}
    assert by_tenant["acme"]["day"] == today
    assert by_tenant["acme"]["operationsCreated"] == 1
    assert by_tenant["acme"]["rowsSubmitted"] == 3 and by_tenant["acme"]["rowsProcessed"] == 3
    assert by_tenant["acme"]["bytesStored"] == len(_rows(3))
    assert by_tenant["globex"]["rowsSubmitted"] == 2

    own = (await service.get("/api/usage", headers=bearer(ACME))).json()
    assert [item["tenant"] for item in own["items"]] == ["acme"]
    other = await service.get("/api/usage?tenant=globex", headers=bearer(ACME))
    assert other.json()["items"] == []
    only = await service.get("/api/usage?tenant=globex", headers=bearer(ADMIN))
    assert [item["tenant"] for item in only.json()["items"]] == ["globex"]
    # Operate access: a reader of the tenant may not.
    assert (await service.get("/api/usage", headers=bearer(ACME_READER))).status_code == 403


async def test_the_client_reads_usage(service: httpx.AsyncClient) -> None:
    created = await _create(service, ACME, 2)
    await _finish(service, ACME, created.json()["operationId"])
    transport = service._transport  # the app's ASGI transport
    async with AsyncClient(str(service.base_url), token=ADMIN, transport=transport) as client:
        usage = await client.get_usage()
        scoped = await client.get_usage(tenant="acme")
    assert usage.days == 30 and usage.items[0].tenant == "acme"
    assert scoped.items[0].rows_submitted == 2 and scoped.items[0].operations_created == 1
