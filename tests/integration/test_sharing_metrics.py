"""GET /metrics shows the processing share: runnable operations and rows per tenant."""

from __future__ import annotations

from tests.integration.conftest import ClientFactory, create_ok, wait_status
from tests.integration.test_metrics import scrape

CSV = "name,email,age\n" + "".join(f"P{n},p{n}@example.com,{n}\n" for n in range(1, 6))


async def test_metrics_show_runnable_operations_and_rows_per_tenant(
    make_client: ClientFactory,
) -> None:
    client = await make_client()
    alice = await create_ok(client, CSV, extra={"createdBy": "alice"})
    bob = await create_ok(client, CSV[: CSV.index("P3")], extra={"createdBy": "bob"})
    await wait_status(client, alice)
    await wait_status(client, bob)

    found = await scrape(client)

    assert found[("bulkops_tenant_rows_total", (("tenant", "alice"),))] == 5
    assert found[("bulkops_tenant_rows_total", (("tenant", "bob"),))] == 2
    assert found[("bulkops_runnable_operations", ())] == 0  # both ended
    assert found[("bulkops_tenant_waiting_rows", (("tenant", "alice"),))] == 0
