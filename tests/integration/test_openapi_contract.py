"""The API description says what the service does: status codes, bodies, links, Allow."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.conftest import create_ok, wait_status

OPERATION_IDS = {  # DECISIONS.md, HTTP contract, plus the two health checks and metrics
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
    "exportBulk",
    "cancelBulk",
    "getRetryEligibility",
    "retryBulk",
    "retryBulkRows",
    "getRetryHistory",
    "signalStep",
    "failStep",
    "getEvents",
    "getBulkEvents",
    "getLiveness",
    "getReadiness",
    "getMetrics",
    "getBulkNotifications",
    "fixBulkRow",  # the third wave: a failed row fixed in place
    "undoBulk",  # the fourth wave: undo a finished operation
    # the fourth wave: saved column mappings
    "getOperationMappings",
    "getOperationMapping",
    "saveOperationMapping",
    "deleteOperationMapping",
    "getUsage",  # the fourth wave: each tenant's use by day
    # The fourth wave: bulk actions
    "createAction",
    "getActions",
    "getAction",
    "cancelAction",
}


@pytest.fixture
async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi/v1.json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def operations(document: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        op["operationId"]: (path, op)
        for path, item in document["paths"].items()
        for op in item.values()
    }


async def test_operation_ids_are_exactly_the_contract(document: dict[str, Any]) -> None:
    assert set(operations(document)) == OPERATION_IDS


async def test_every_answer_is_documented(document: dict[str, Any]) -> None:
    for operation_id, (path, operation) in operations(document).items():
        codes = set(operation["responses"])
        assert "422" not in codes or operation_id in (
            "createBulk",
            "validateBulk",
            "fixBulkRow",
            "saveOperationMapping",
        )
        if "{id}" in path:
            assert "404" in codes, operation_id
        if path.startswith("/api/"):
            assert "503" in codes, operation_id
        if any(p["in"] == "query" for p in operation.get("parameters", [])):
            assert "400" in codes, operation_id
    ops = operations(document)
    assert {"400", "413", "415", "422"} <= set(ops["createBulk"][1]["responses"])
    assert {"200", "400", "413", "415", "422"} <= set(ops["validateBulk"][1]["responses"])
    assert "409" in ops["cancelBulk"][1]["responses"]
    assert {"400", "409"} <= set(ops["retryBulkRows"][1]["responses"])
    assert "503" in ops["getReadiness"][1]["responses"]
    assert "HTTPValidationError" not in document["components"]["schemas"]


async def test_submission_bodies_name_their_required_parts(document: dict[str, Any]) -> None:
    ops = operations(document)
    for operation_id in ("createBulk", "validateBulk"):
        body = ops[operation_id][1]["requestBody"]
        assert body["required"] is True
        media = body["content"]["multipart/form-data"]
        schema = media["schema"]
        # A create may read an earlier operation's file instead (sourceOperationId).
        assert schema["required"] == ([] if operation_id == "createBulk" else ["file"])
        assert schema["properties"]["file"]["format"] == "binary"
        assert "text/csv" in media["encoding"]["file"]["contentType"]
        variants = {v["properties"]["operationName"]["const"]: v for v in schema["oneOf"]}
        assert "record" in variants and "gated" in variants
        record = variants["record"]
        assert record["required"] == ["operationName", "metadata"]
        assert record["properties"]["metadata"]["required"] == ["requestedBy"]
    create = ops["createBulk"][1]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert {"notifications", "dryRun", "sourceOperationId"} <= set(create["properties"])
    assert create["properties"]["dryRun"]["enum"] == ["true", "false"]
    assert create["allOf"] == [
        {"oneOf": [{"required": ["file"]}, {"required": ["sourceOperationId"]}]}
    ]


async def test_create_links_to_every_id_route(document: dict[str, Any]) -> None:
    ops = operations(document)
    created = ops["createBulk"][1]["responses"]["201"]
    id_routes = {
        oid
        for oid, (path, _) in ops.items()
        if "{id}" in path and not path.startswith("/api/actions/")  # an action's id
    }
    linked = {link["operationId"] for link in created["links"].values()}
    assert linked == id_routes and len(id_routes) == 17
    for link in created["links"].values():
        assert link["parameters"] == {"id": "$response.body#/operationId"}
    assert "Location" in created["headers"]


async def test_405_lists_every_allowed_method(client: httpx.AsyncClient) -> None:
    delete = await client.delete("/api/bulks")
    assert delete.status_code == 405 and delete.headers["Allow"] == "GET, POST"
    assert delete.json() == {"error": "Method Not Allowed"}
    # "validate" is not an operation id: GET on the validate route is a 405, not a 404.
    get_validate = await client.get("/api/bulks/validate")
    assert get_validate.status_code == 405 and get_validate.headers["Allow"] == "POST"
    operation_id = await create_ok(client, "name,email\nAda,a@x.io\n")
    put = await client.put(f"/api/bulks/{operation_id}/status")
    assert put.status_code == 405 and put.headers["Allow"] == "GET"


@pytest.mark.parametrize(
    "query",
    [
        "/api/bulks?to=0.5",
        "/api/bulks?from=2024-05-01",
        "/api/bulks?from=1714550400",
        f"/api/bulks?page={2**31}",
        f"/api/bulks?pageSize={-(2**31) - 1}",
        f"/api/events?since={2**63}",
        f"/api/events?limit={2**40}",
        f"/api/bulks/{'0' * 8}-0000-0000-0000-{'0' * 12}/errors?rowNumber={2**31}",
    ],
)
async def test_out_of_range_and_malformed_values_are_400(
    client: httpx.AsyncClient, query: str
) -> None:
    response = await client.get(query)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("Invalid request")


async def test_in_range_extremes_are_answered(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, "name,email\nAda,a@x.io\n")
    for query in (
        f"/api/bulks?page={2**31 - 1}&pageSize={2**31 - 1}",
        "/api/bulks?from=2024-05-01T00:00:00Z&to=2999-01-01T00:00:00%2B02:00",
        f"/api/events?since={2**63 - 1}&limit=0",
        f"/api/bulks/{operation_id}/errors?rowNumber={-(2**31)}&page={2**31 - 1}",
        f"/api/bulks/{operation_id}/retry/history?rowNumber={2**31 - 1}",
    ):
        response = await client.get(query)
        assert response.status_code == 200, (query, response.text)


async def test_retry_row_numbers_out_of_range_are_400(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, "name,email\nAda,a@x.io\n")
    for numbers in ([2**31], [1, -(2**31) - 1], [True], []):
        response = await client.post(
            f"/api/bulks/{operation_id}/retry/rows", json={"rowNumbers": numbers}
        )
        assert response.status_code == 400, (numbers, response.text)


async def test_integral_json_numbers_are_row_numbers(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, "name,email\nAda,a@x.io\n")
    await wait_status(client, operation_id)
    response = await client.post(
        f"/api/bulks/{operation_id}/retry/rows", json={"rowNumbers": [1.0, 2]}
    )
    # Reaches the retry rules (the operation is not retryable), not a 400 about the body.
    assert response.status_code == 409, response.text
    fraction = await client.post(
        f"/api/bulks/{operation_id}/retry/rows", json={"rowNumbers": [1.5]}
    )
    assert fraction.status_code == 400
