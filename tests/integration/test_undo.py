"""Undo over HTTP: the preview, the undo operation and its rows, refusals, retry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration import undo_operations as uops
from tests.integration.conftest import ClientFactory, create_ok, wait_status


@pytest.fixture(autouse=True)
def _reset() -> None:
    uops.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {"step_retry_delay": 0}
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(uops.ALL, **options)


async def run(client: httpx.AsyncClient, operation: str, csv: str) -> str:
    operation_id = await create_ok(client, csv, operation=operation, metadata={})
    await wait_status(client, operation_id)
    return operation_id


async def detail(client: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/bulks/{operation_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def undo(client: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    response = await client.post(f"/api/bulks/{operation_id}/undo")
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/api/bulks/{body['id']}"
    await wait_status(client, body["id"])
    return body


PIPELINE_CSV = "name,value\nann,1\nbad,2\ncy,3\n"


async def test_undo_of_a_pipeline_undoes_completed_steps_in_reverse_order(
    client: httpx.AsyncClient,
) -> None:
    original = await run(client, "undo-pipeline", PIPELINE_CSV)
    assert (await detail(client, original))["status"] == "CompletedWithErrors"
    preview = await client.post(f"/api/bulks/{original}/undo", json={"preview": True})
    assert preview.status_code == 200, preview.text
    # ann and cy: Grant access and Create account; bad failed at Grant access: Create only.
    assert preview.json() == {"rows": 3, "steps": 5}
    assert uops.undos("undo-pipeline") == []  # a preview runs nothing

    made = await undo(client, original)
    assert made["undoOf"] == original
    assert made["operationName"] == "undo-pipeline"
    assert made["totalRows"] == 3
    assert (await detail(client, original))["undoneBy"] == made["id"]
    done = await detail(client, made["id"])
    assert done["status"] == "Completed"
    assert (done["totalRows"], done["successfulRows"], done["errorCount"]) == (3, 3, 0)

    calls = uops.undos("undo-pipeline")
    by_row = {n: [(c.step, c.step_index) for c in calls if c.row_number == n] for n in (1, 2, 3)}
    assert by_row[1] == [("Grant access", 2), ("Create account", 0)]
    assert by_row[2] == [("Create account", 0)]
    assert by_row[3] == [("Grant access", 2), ("Create account", 0)]
    for call in calls:
        assert call.undo
        assert call.key == f"{made['id']}:{call.row_number}:{call.step_index}"
    assert {c.value for c in calls if c.row_number == 2} == {"bad:2"}  # the data it ran with

    rows = (await client.get(f"/api/bulks/{made['id']}/rows?pageSize=10")).json()["items"]
    assert [row["rowNumber"] for row in rows] == [1, 2, 3]
    assert all(row["state"] == "Completed" for row in rows)


async def test_refusals_name_their_reason(client: httpx.AsyncClient) -> None:
    plain = await run(client, "no-undo", "name\nann\n")
    refused = await client.post(f"/api/bulks/{plain}/undo")
    assert refused.status_code == 409
    assert "defines no undo" in refused.text
    assert (await client.post(f"/api/bulks/{plain}/undo", json={"preview": True})).status_code == (
        409
    )

    original = await run(client, "undo-rows", "name,value\nann,1\n")
    made = await undo(client, original)
    again = await client.post(f"/api/bulks/{original}/undo")
    assert again.status_code == 409
    assert made["id"] in again.text  # names the first undo
    of_undo = await client.post(f"/api/bulks/{made['id']}/undo")
    assert of_undo.status_code == 409
    assert "cannot be undone" in of_undo.text

    unknown = "00000000-0000-4000-8000-000000000000"
    assert (await client.post(f"/api/bulks/{unknown}/undo")).status_code == 404
    bad_body = await client.post(f"/api/bulks/{original}/undo", json={"preview": "yes"})
    assert bad_body.status_code == 400
    assert len(uops.undos("undo-rows")) == 1


async def test_undo_of_row_operations_uses_the_data_as_run(client: httpx.AsyncClient) -> None:
    # Row 2 fails, is fixed in place and retried: its undo sees the fixed data.
    original = await run(client, "undo-rows", "name,value\nann,1\nbob,fail\ncy,3\n")
    fixed = await client.patch(
        f"/api/bulks/{original}/rows/2", json={"rowData": {"name": "bob", "value": "2"}}
    )
    assert fixed.status_code == 200, fixed.text
    assert (await client.post(f"/api/bulks/{original}/retry")).status_code == 200
    await wait_status(client, original)
    assert (await detail(client, original))["status"] == "Completed"
    made = await undo(client, original)
    values = sorted(call.value for call in uops.undos("undo-rows"))
    assert values == ["ann:1", "bob:2", "cy:3"]
    assert {(c.step, c.step_index) for c in uops.undos("undo-rows")} == {("process", 0)}
    assert (await detail(client, made["id"]))["successfulRows"] == 3

    plain = await run(client, "undo-plain", "name,value\nann,1\nbo,2\n")
    await undo(client, plain)
    assert sorted(c.value for c in uops.undos("undo-plain")) == ["ann:1", "bo:2"]

    batch = await run(client, "undo-batch", "name,value\na,1\nb,fail\nc,3\n")
    assert await client.post(f"/api/bulks/{batch}/undo", json={"preview": True}) is not None
    preview = await client.post(f"/api/bulks/{batch}/undo", json={"preview": True})
    assert preview.json() == {"rows": 2, "steps": 2}
    await undo(client, batch)
    assert sorted(c.value for c in uops.undos("undo-batch")) == ["a:1", "c:3"]


async def test_a_failed_undo_is_retried_and_skips_what_was_undone(
    client: httpx.AsyncClient,
) -> None:
    original = await run(client, "undo-pipeline", "name,value\nann,1\nflo,2\n")
    uops.FLAKY.add("flo")
    made = await undo(client, original)
    done = await detail(client, made["id"])
    assert done["status"] == "CompletedWithErrors"
    errors = (await client.get(f"/api/bulks/{made['id']}/errors")).json()["items"]
    assert [(e["rowNumber"], e["stepName"]) for e in errors] == [(2, "Grant access")]
    retried = await client.post(f"/api/bulks/{made['id']}/retry")
    assert retried.status_code == 200, retried.text
    await wait_status(client, made["id"])
    assert (await detail(client, made["id"]))["status"] == "Completed"
    flo = [(c.step, c.attempt) for c in uops.undos("undo-pipeline") if c.row_number == 2]
    # Grant access failed, then on retry ran again before Create account ran once.
    assert flo == [("Grant access", 1), ("Grant access", 1), ("Create account", 1)]


async def test_an_undo_of_plain_rows_keeps_only_a_failed_rows_data_and_retries_it(
    client: httpx.AsyncClient,
) -> None:
    # No row data kept: a failed undo keeps the data it ran with, and its retry reruns it.
    original = await run(client, "undo-plain", "name,value\nann,1\nbo,2\ncy,3\n")
    uops.FLAKY.add("bo")
    made = await undo(client, original)
    done = await detail(client, made["id"])
    assert done["status"] == "CompletedWithErrors"
    assert (done["successfulRows"], done["errorCount"]) == (2, 1)
    calls = uops.undos("undo-plain")
    assert [(c.row_number, c.value) for c in calls] == [(1, "ann:1"), (2, "bo:2"), (3, "cy:3")]
    for call in calls:
        assert (call.undo, call.step, call.step_index, call.attempt) == (True, "process", 0, 1)
        assert call.key == f"{made['id']}:{call.row_number}:0"
    rows = (await client.get(f"/api/bulks/{made['id']}/rows?pageSize=10")).json()["items"]
    assert [(r["rowNumber"], r["state"]) for r in rows] == [
        (1, "Completed"),
        (2, "Failed"),
        (3, "Completed"),
    ]
    errors = (await client.get(f"/api/bulks/{made['id']}/errors")).json()["items"]
    assert [(e["rowNumber"], e["stepName"], e["errorMessage"]) for e in errors] == [
        (2, "process", "undo failed once")
    ]
    assert errors[0]["rowData"] == {"name": "bo", "value": "2"}  # read from the file

    retried = await client.post(f"/api/bulks/{made['id']}/retry")
    assert retried.status_code == 200, retried.text
    await wait_status(client, made["id"])
    assert (await detail(client, made["id"]))["status"] == "Completed"
    again = uops.undos("undo-plain")[len(calls) :]
    assert [(c.row_number, c.value, c.undo) for c in again] == [(2, "bo:2", True)]


async def test_the_client_undoes_and_previews(client: httpx.AsyncClient) -> None:
    from bulkops.client import ApiError, AsyncClient, OperationStatus, UndoPreview

    original = await run(client, "undo-rows", "name,value\nann,1\nbob,2\n")
    transport = client._transport
    async with AsyncClient("http://bulkops.test", transport=transport) as api:  # type: ignore[arg-type]
        counted = await api.undo_bulk(original, preview=True)
        assert counted == UndoPreview(rows=2, steps=2)
        made = await api.undo_bulk(original)
        assert str(made.undo_of) == original
        final = await api.wait(made.id, poll_interval=0.05)
        assert final.status is OperationStatus.COMPLETED
        assert str((await api.get_bulk(original)).undone_by) == str(made.id)
        try:
            await api.undo_bulk(original)
        except ApiError as exc:
            assert exc.status_code == 409
        else:
            raise AssertionError("a second undo was accepted")


async def test_an_undo_keeps_the_tenant_and_is_scoped_and_attributed(
    make_client: ClientFactory,
) -> None:
    import json

    tokens = {
        "acme": {"role": "operate", "name": "alice", "tenant": "acme"},
        "acme-read": {"role": "read", "name": "ann", "tenant": "acme"},
        "globex": {"role": "operate", "name": "bob", "tenant": "globex"},
    }
    service = await make_client(uops.ALL, auth_tokens=json.dumps(tokens))

    def as_(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    created = await service.post(
        "/api/bulks",
        data={"operationName": "undo-rows", "metadata": "{}"},
        files={"file": ("rows.csv", b"name,value\nann,1\n", "text/csv")},
        headers=as_("acme"),
    )
    assert created.status_code == 201, created.text
    original = created.json()["operationId"]
    service.headers.update(as_("acme"))
    await wait_status(service, original)
    # Another tenant does not see it; a reader may not undo it.
    assert (
        await service.post(f"/api/bulks/{original}/undo", headers=as_("globex"))
    ).status_code == (404)
    assert (
        await service.post(f"/api/bulks/{original}/undo", headers=as_("acme-read"))
    ).status_code == (403)
    made = await service.post(f"/api/bulks/{original}/undo")
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["tenant"], body["createdBy"]) == ("acme", "alice")
    await wait_status(service, body["id"])
    events = (await service.get(f"/api/bulks/{body['id']}/events")).json()
    assert events[0]["type"] == "Created"
    assert f"to undo operation {original}" in events[0]["message"]
    assert events[0]["actor"] == "alice"  # the requester, like a create's
    assert events[-1]["type"] == "Completed"
