"""GET /metrics shows the processing share: runnable operations and rows per tenant."""

from __future__ import annotations

import bulkops as bo
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


class TeamMeta(bo.Metadata):
    team: str


class Name(bo.Row):
    name: str


@bo.operation("team-import", description="Rows count against the team named in the metadata")
class TeamImport(bo.RowOperation[TeamMeta, Name]):
    def fairness_key(self, metadata: TeamMeta, created_by: str) -> str:
        return f"team:{metadata.team}"

    async def process_row(self, row: Name, metadata: TeamMeta) -> None:
        """Nothing to do."""


async def test_an_operation_class_fairness_key_names_the_tenant(
    make_client: ClientFactory,
) -> None:
    client = await make_client([TeamImport])
    operation_id = await create_ok(
        client,
        "name\na\nb\nc\n",
        operation="team-import",
        metadata={"team": "blue"},
        extra={"createdBy": "alice"},
    )
    await wait_status(client, operation_id)

    found = await scrape(client)

    assert found[("bulkops_tenant_rows_total", (("tenant", "team:blue"),))] == 3
    assert ("bulkops_tenant_rows_total", (("tenant", "alice"),)) not in found
