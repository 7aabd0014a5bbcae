"""``GET /api/usage`` through a gateway: every backend's use, added up per tenant and day."""

from __future__ import annotations

from datetime import UTC, datetime

from bulkops.gateway.routes.usage import merge
from tests.gateway.conftest import BackendServer, GatewayFactory, create, wait_finished


async def test_usage_adds_up_every_backends(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    for operation, content in (("alpha-import", "name\nx\ny\n"), ("beta-import", "name\nz\n")):
        await wait_finished(gateway, await create(gateway, operation, content))

    usage = (await gateway.get("/api/usage")).json()

    today = datetime.now(UTC).date().isoformat()
    assert usage["days"] == 30
    [item] = usage["items"]
    assert item["day"] == today and "tenant" not in item
    assert (item["operationsCreated"], item["rowsSubmitted"], item["rowsProcessed"]) == (2, 3, 3)


def test_merge_orders_newest_day_first_then_by_tenant() -> None:
    def item(day: str, tenant: str | None, rows: int) -> dict[str, object]:
        found: dict[str, object] = {"day": day, "operationsCreated": 1, "rowsSubmitted": rows}
        found.update(rowsProcessed=rows, bytesStored=10)
        return found if tenant is None else {**found, "tenant": tenant}

    merged = merge(
        [
            {"days": 30, "items": [item("2026-11-28", "b", 1), item("2026-11-27", "a", 2)]},
            {"days": 30, "items": [item("2026-11-28", "a", 3), item("2026-11-28", "b", 4)]},
        ]
    )
    assert [(i["day"], i.get("tenant"), i["rowsSubmitted"]) for i in merged["items"]] == [
        ("2026-11-28", "a", 3),
        ("2026-11-28", "b", 5),
        ("2026-11-27", "a", 2),
    ]
    assert merged["items"][1]["operationsCreated"] == 2 and merged["items"][1]["bytesStored"] == 20
