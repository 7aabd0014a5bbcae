"""Saved column mappings over HTTP: save, list, read, delete, and their use by create and
validate (``mapping=<name>``); on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import httpx

from tests.integration.auth_support import bearer
from tests.integration.conftest import ClientFactory, create, create_ok, wait_status

CSV = "Full Name,E-Mail\nAda,ada@example.com\n"
META = '{"requestedBy": "tests"}'
ROUTE = "/api/operations/record/mappings"


async def test_save_list_get_and_delete(client: httpx.AsyncClient) -> None:
    saved = await client.put(f"{ROUTE}/supplier a", json={"columnMap": {"E-Mail": "email"}})
    assert saved.status_code == 200, saved.text
    assert saved.json() == {"name": "supplier a", "columnMap": {"E-Mail": "email"}}
    await client.put(f"{ROUTE}/Monthly", json={"columnMap": {"Full Name": "name"}})
    listed = (await client.get(ROUTE)).json()
    assert [m["name"] for m in listed["items"]] == ["Monthly", "supplier a"]
    # A save under the same name replaces; the operation's name is case-insensitive.
    again = await client.put(
        "/api/operations/RECORD/mappings/Monthly", json={"columnMap": {"Full Name": "name"}}
    )
    assert again.status_code == 200
    one = await client.get(f"{ROUTE}/Monthly")
    assert one.json() == {"name": "Monthly", "columnMap": {"Full Name": "name"}}
    assert (await client.delete(f"{ROUTE}/Monthly")).status_code == 204
    assert (await client.delete(f"{ROUTE}/Monthly")).status_code == 404
    assert (await client.get(f"{ROUTE}/Monthly")).status_code == 404
    assert [m["name"] for m in (await client.get(ROUTE)).json()["items"]] == ["supplier a"]


async def test_a_mapping_that_does_not_fit_is_422(client: httpx.AsyncClient) -> None:
    unknown = await client.put(f"{ROUTE}/x", json={"columnMap": {"E-Mail": "mail"}})
    assert unknown.status_code == 422
    assert "mail" in unknown.json()["error"]
    for body in ({"columnMap": {}}, {"columnMap": ["email"]}, {"columnMap": {"a": 1}}):
        assert (await client.put(f"{ROUTE}/x", json=body)).status_code == 422, body
    assert (await client.put(f"{ROUTE}/x", json={"other": 1})).status_code == 400
    assert (await client.put(f"{ROUTE}/x", content=b"nope")).status_code == 400
    assert (
        await client.put(f"{ROUTE}/..bad", json={"columnMap": {"a": "email"}})
    ).status_code == 400
    missing = await client.put(
        "/api/operations/nope/mappings/x", json={"columnMap": {"a": "email"}}
    )
    assert missing.status_code == 404
    assert (await client.get(ROUTE)).json() == {"items": []}


async def test_create_and_validate_use_a_saved_mapping(client: httpx.AsyncClient) -> None:
    await client.put(
        f"{ROUTE}/supplier", json={"columnMap": {"Full Name": "name", "E-Mail": "email"}}
    )
    files = {"file": ("rows.csv", CSV, "text/csv")}
    valid = await client.post(
        "/api/bulks/validate",
        data={"operationName": "record", "metadata": META, "mapping": "supplier"},
        files=files,
    )
    assert valid.status_code == 200, valid.text
    without = await client.post(
        "/api/bulks/validate", data={"operationName": "record", "metadata": META}, files=files
    )
    assert without.status_code == 422
    operation_id = await create_ok(client, CSV, extra={"mapping": "supplier"})
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["columnMap"] == {"Full Name": "name", "E-Mail": "email"}
    assert (await wait_status(client, operation_id))["status"] == "Completed"
    unknown = await create(client, CSV, metadata=META, extra={"mapping": "nope"})
    assert unknown.status_code == 400
    assert "nope" in unknown.json()["error"]
    both = await create(
        client, CSV, metadata=META, extra={"mapping": "supplier", "columnMap": "{}"}
    )
    assert both.status_code == 400


async def test_mappings_and_duplicates_are_kept_per_tenant(make_client: ClientFactory) -> None:
    tokens = {
        "acme": {"role": "operate", "name": "alice", "tenant": "acme"},
        "acme-read": {"role": "read", "name": "ann", "tenant": "acme"},
        "globex": {"role": "operate", "name": "bob", "tenant": "globex"},
    }
    client = await make_client(auth_tokens=json.dumps(tokens))
    acme, globex = bearer("acme"), bearer("globex")
    body = {"columnMap": {"Full Name": "name", "E-Mail": "email"}}
    assert (await client.put(f"{ROUTE}/supplier", json=body, headers=acme)).status_code == 200
    denied = await client.put(f"{ROUTE}/supplier", json=body, headers=bearer("acme-read"))
    assert denied.status_code == 403
    assert (await client.get(ROUTE, headers=globex)).json() == {"items": []}
    assert len((await client.get(ROUTE, headers=bearer("acme-read"))).json()["items"]) == 1
    assert (await client.get(f"{ROUTE}/supplier", headers=globex)).status_code == 404
    data = {"operationName": "record", "metadata": META, "mapping": "supplier"}
    files = {"file": ("rows.csv", CSV, "text/csv")}
    created = await client.post("/api/bulks", data=data, files=files, headers=acme)
    assert created.status_code == 201, created.text
    other = await client.post("/api/bulks", data=data, files=files, headers=globex)
    assert other.status_code == 400  # globex has no mapping of that name
    # The same file is a duplicate for acme only.
    check = {
        "operationName": "record",
        "metadata": META,
        "columnMap": json.dumps(body["columnMap"]),
    }
    mine = await client.post("/api/bulks/validate", data=check, files=files, headers=acme)
    assert mine.json()["duplicateOf"] == created.json()["operationId"]
    theirs = await client.post("/api/bulks/validate", data=check, files=files, headers=globex)
    assert theirs.status_code == 200 and "duplicateOf" not in theirs.json()
