"""Reading operations over HTTP: list, detail, status, errors, rows, file, events, health."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.integration.conftest import create_ok, wait_status

MIXED_CSV = (
    "name,email,age\n"
    "Ada,ada@example.com,36\n"  # 1 ok
    "Bob,bob-at-example,3\n"  # 2 Validation (validate_row)
    "Cy,cy@example.com,old\n"  # 3 Validation (conversion)
    "boom,boom@example.com,1\n"  # 4 Processing
    "Dee,dee@example.com,\n"  # 5 ok
)


@pytest.fixture
async def finished_id(client: httpx.AsyncClient) -> str:
    operation_id = await create_ok(client, MIXED_CSV)
    await wait_status(client, operation_id)
    return operation_id


async def test_status_and_detail_of_a_finished_operation(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    status = (await client.get(f"/api/bulks/{finished_id}/status")).json()
    assert status["status"] == "CompletedWithErrors"
    assert (status["processedRows"], status["totalRows"], status["errorCount"]) == (5, 5, 3)
    assert status["progress"] == 100
    detail = (await client.get(f"/api/bulks/{finished_id}")).json()
    assert detail["successfulRows"] == 2 and detail["retryCount"] == 0
    assert detail["startedAt"] <= detail["completedAt"]
    assert "errorMessage" not in detail


async def test_errors_are_paged_typed_and_filterable(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    body = (await client.get(f"/api/bulks/{finished_id}/errors")).json()
    assert body["totalCount"] == 3 and body["page"] == 1 and body["pageSize"] == 25
    assert body["hasNextPage"] is False
    rows = {item["rowNumber"]: item for item in body["items"]}
    assert set(rows) == {2, 3, 4}
    assert rows[2]["errorType"] == "Validation" and rows[2]["stepIndex"] == -1
    assert rows[2]["stepName"] == "validation"
    assert rows[2]["errorMessage"] == "Invalid email 'bob-at-example'"
    assert rows[2]["rowId"] == "bob-at-example"
    assert rows[3]["errorType"] == "Validation"
    assert rows[3]["errorMessage"].startswith("age: Input should be a valid integer")
    assert rows[4]["errorType"] == "Processing" and rows[4]["stepIndex"] == 0
    assert rows[4]["stepName"] == "process"
    assert rows[4]["errorMessage"] == "exploded on purpose"
    assert rows[4]["state"] == "Failed" and rows[4]["retryAttempt"] == 0
    assert rows[4]["rowData"] == {"name": "boom", "email": "boom@example.com", "age": "1"}

    processing = (await client.get(f"/api/bulks/{finished_id}/errors?errorType=processing")).json()
    assert [i["rowNumber"] for i in processing["items"]] == [4]
    unknown = (await client.get(f"/api/bulks/{finished_id}/errors?errorType=Bogus")).json()
    assert unknown["totalCount"] == 3
    paged = (await client.get(f"/api/bulks/{finished_id}/errors?page=2&pageSize=2")).json()
    assert [i["rowNumber"] for i in paged["items"]] == [4]
    assert paged["hasNextPage"] is False and paged["pageSize"] == 2
    first = (await client.get(f"/api/bulks/{finished_id}/errors?pageSize=2")).json()
    assert first["hasNextPage"] is True
    one = (await client.get(f"/api/bulks/{finished_id}/errors?rowNumber=3")).json()
    assert [i["rowNumber"] for i in one["items"]] == [3]


async def test_rows_show_every_row_with_its_step(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    body = (await client.get(f"/api/bulks/{finished_id}/rows?pageSize=10")).json()
    assert body["totalCount"] == 5
    first = body["items"][0]
    assert first["rowNumber"] == 1 and first["state"] == "Completed"
    assert first["currentStep"] == "process" and first["completedSteps"] == 1
    assert first["totalSteps"] == 1
    assert first["steps"][0]["name"] == "process" and first["steps"][0]["attempts"] == 1
    invalid = body["items"][1]
    assert invalid["currentStep"] == "validation" and invalid["stepIndex"] == -1
    assert invalid["steps"][0]["state"] == "Pending" and invalid["steps"][0]["attempts"] == 0
    failed = (await client.get(f"/api/bulks/{finished_id}/rows?state=failed")).json()
    assert [i["rowNumber"] for i in failed["items"]] == [2, 3, 4]
    by_step = (await client.get(f"/api/bulks/{finished_id}/rows?stepName=validation")).json()
    assert [i["rowNumber"] for i in by_step["items"]] == [2, 3]


async def test_rows_and_errors_walk_with_the_keyset_cursor(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    first = (await client.get(f"/api/bulks/{finished_id}/rows?pageSize=2")).json()
    assert [i["rowNumber"] for i in first["items"]] == [1, 2] and first["nextAfter"] == 2
    second = (await client.get(f"/api/bulks/{finished_id}/rows?pageSize=2&after=2")).json()
    assert [i["rowNumber"] for i in second["items"]] == [3, 4] and second["nextAfter"] == 4
    last = (await client.get(f"/api/bulks/{finished_id}/rows?pageSize=2&after=4")).json()
    assert [i["rowNumber"] for i in last["items"]] == [5]
    assert "nextAfter" not in last and last["hasNextPage"] is False
    assert last["totalCount"] == 5
    errors = (await client.get(f"/api/bulks/{finished_id}/errors?pageSize=2&after=2")).json()
    assert [i["rowNumber"] for i in errors["items"]] == [3, 4] and "nextAfter" not in errors
    bad = await client.get(f"/api/bulks/{finished_id}/rows?after=-1")
    assert bad.status_code == 400


async def test_file_download_returns_the_original_bytes(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    response = await client.get(f"/api/bulks/{finished_id}/file")
    assert response.status_code == 200
    assert response.content == MIXED_CSV.encode()
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"] == 'attachment; filename="rows.csv"'


async def test_non_ascii_download_name_uses_rfc6266(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, MIXED_CSV, file_name="nutzer-ä.csv")
    response = await client.get(f"/api/bulks/{operation_id}/file")
    disposition = response.headers["content-disposition"]
    assert "filename*=UTF-8''nutzer-%C3%A4.csv" in disposition


async def test_list_filters_and_orders_newest_first(client: httpx.AsyncClient) -> None:
    first = await create_ok(client, MIXED_CSV, extra={"createdBy": "ann"})
    second = await create_ok(client, MIXED_CSV, operation="strict-meta")
    for operation_id in (first, second):
        await wait_status(client, operation_id)
    listing = (await client.get("/api/bulks")).json()
    assert [i["id"] for i in listing["items"]] == [second, first]
    by_name = (await client.get("/api/bulks?operationName=STRICT-META")).json()
    assert [i["id"] for i in by_name["items"]] == [second]
    by_creator = (await client.get("/api/bulks?createdBy=Ann")).json()
    assert [i["id"] for i in by_creator["items"]] == [first]
    by_status = (await client.get("/api/bulks?status=completedwitherrors")).json()
    assert by_status["totalCount"] == 2
    ignored = (await client.get("/api/bulks?status=Validating")).json()
    assert ignored["totalCount"] == 2
    created = listing["items"][1]["createdAt"]
    window = (await client.get("/api/bulks", params={"from": created, "to": created})).json()
    assert [i["id"] for i in window["items"]] == [first]
    clamped = (await client.get("/api/bulks?pageSize=5000&page=0")).json()
    assert clamped["pageSize"] == 1000 and clamped["page"] == 1
    bad = await client.get("/api/bulks?from=yesterday")
    assert bad.status_code == 400 and "from" in bad.json()["error"]


async def test_events_record_the_whole_life_cycle(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    events = (await client.get(f"/api/bulks/{finished_id}/events")).json()
    types = [e["type"] for e in events]
    assert types[0] == "Created" and types[1] == "StatusChanged"
    assert types.count("RowFailed") == 3
    assert types[-1] == "Completed"
    completed = events[-1]
    assert completed["severity"] == "Warning"
    assert "2 of 5 rows succeeded" in completed["message"]
    assert all(e["operationId"] == finished_id for e in events)
    assert [e["sequence"] for e in events] == sorted(e["sequence"] for e in events)
    row_failed = next(e for e in events if e["type"] == "RowFailed")
    assert row_failed["severity"] == "Error" and "Row 2" in row_failed["message"]

    feed = (await client.get("/api/events")).json()
    assert [e["sequence"] for e in feed] == [e["sequence"] for e in events]
    cursor = events[2]["sequence"]
    after = (await client.get(f"/api/events?since={cursor}&limit=2")).json()
    assert [e["sequence"] for e in after] == [e["sequence"] for e in events[3:5]]
    newest = (await client.get("/api/events?limit=1")).json()
    assert [e["type"] for e in newest] == ["Completed"]
    assert (await client.get(f"/api/events?since={events[-1]['sequence']}")).json() == []


@pytest.mark.parametrize("suffix", ["", "/status", "/errors", "/rows", "/file", "/events"])
async def test_unknown_and_malformed_ids_are_404_with_an_error_body(
    client: httpx.AsyncClient, suffix: str
) -> None:
    for operation_id in (str(uuid.uuid4()), "not-a-guid", "123"):
        response = await client.get(f"/api/bulks/{operation_id}{suffix}")
        assert response.status_code == 404, (operation_id, suffix)
        assert "not found" in response.json()["error"]


async def test_cancel_of_unknown_or_finished_operation(
    client: httpx.AsyncClient, finished_id: str
) -> None:
    unknown = await client.post(f"/api/bulks/{uuid.uuid4()}/cancel")
    assert unknown.status_code == 404
    malformed = await client.post("/api/bulks/xyz/cancel")
    assert malformed.status_code == 404
    finished = await client.post(f"/api/bulks/{finished_id}/cancel")
    assert finished.status_code == 409
    assert "CompletedWithErrors" in finished.json()["error"]


async def test_discovery_and_template(client: httpx.AsyncClient) -> None:
    operations = (await client.get("/api/operations")).json()
    record = next(o for o in operations if o["name"] == "record")
    assert record["description"] == "Records each processed row"
    assert record["isStepBased"] is False and record["steps"] == ["process"]
    assert record["metadataFields"] == [
        {"name": "requestedBy", "type": "string", "required": True},
        {"name": "department", "type": "string?", "required": False},
    ]
    assert [c["name"] for c in record["fileColumns"]] == ["name", "email", "age"]
    template = await client.get("/api/operations/record/template")
    assert template.status_code == 200
    assert template.text == "name,email,age\r\n"
    assert template.headers["content-disposition"] == ('attachment; filename="record-template.csv"')
    missing = await client.get("/api/operations/nope/template")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]


async def test_health_and_unknown_routes(client: httpx.AsyncClient) -> None:
    assert (await client.get("/health/live")).json() == {"status": "Healthy"}
    ready = await client.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "Healthy"
    missing = await client.get("/api/nothing-here")
    assert missing.status_code == 404 and missing.json() == {"error": "Not Found"}
    wrong_method = await client.delete("/api/bulks")
    assert wrong_method.status_code == 405 and "error" in wrong_method.json()
    bad_page = await client.get("/api/bulks?page=abc")
    assert bad_page.status_code == 400 and "page" in bad_page.json()["error"]


async def test_openapi_document_has_every_operation_id(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi/v1.json")).json()
    ids = {
        operation["operationId"]
        for path in document["paths"].values()
        for operation in path.values()
    }
    assert {
        "getOperations",
        "getOperationTemplate",
        "getBulks",
        "createBulk",
        "validateBulk",
        "getBulk",
        "getBulkStatus",
        "getBulkErrors",
        "getBulkRows",
        "getBulkFile",
        "cancelBulk",
        "getEvents",
        "getBulkEvents",
    } <= ids
