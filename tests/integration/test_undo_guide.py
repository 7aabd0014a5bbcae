"""The undo guide's samples (the built-in examples' undos) do what the guide says."""

from __future__ import annotations

import httpx

from bulkops.examples.operations import ImportUsers, OnboardEmployees
from tests.integration.conftest import ClientFactory, create_ok, wait_status

CSV = (
    "name,email,age\n"
    "Ada,ada@example.com,36\n"
    "Bob,bob@blocked.example,41\n"  # fails: nothing to undo
    "Cy,cy@example.com,\n"
)


async def test_the_guides_undo_deletes_the_accounts_the_import_created(
    make_client: ClientFactory,
) -> None:
    client: httpx.AsyncClient = await make_client([ImportUsers, OnboardEmployees])
    directory = ImportUsers.directory
    directory.accounts.clear()
    metadata = {"requestedBy": "guide"}
    original = await create_ok(client, CSV, operation="import-users", metadata=metadata)
    await wait_status(client, original)
    assert directory.accounts >= {"ada@example.com", "cy@example.com"}
    preview = await client.post(f"/api/bulks/{original}/undo", json={"preview": True})
    assert preview.json() == {"rows": 2, "steps": 2}
    made = await client.post(f"/api/bulks/{original}/undo")
    assert made.status_code == 201
    undo_id = made.json()["id"]
    assert (await wait_status(client, undo_id))["status"] == "Completed"
    assert not directory.accounts & {"ada@example.com", "cy@example.com"}
    detail = (await client.get(f"/api/bulks/{original}")).json()
    assert detail["undoneBy"] == undo_id
    described = (await client.get("/api/operations")).json()
    assert {d["name"] for d in described if d.get("undoable")} == {
        "import-users",
        "onboard-employees",
    }
