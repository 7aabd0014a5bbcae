"""The gateway's API description is the instance's plus the two gateway additions."""

from __future__ import annotations

import copy
from typing import Any

from tests.gateway.conftest import BackendServer, GatewayFactory


def _operation_ids(document: dict[str, Any]) -> set[str]:
    return {
        operation["operationId"]
        for item in document["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }


def _form(document: dict[str, Any], path: str) -> dict[str, Any]:
    form: dict[str, Any] = document["paths"][path]["post"]["requestBody"]["content"][
        "multipart/form-data"
    ]["schema"]
    return form


async def test_the_description_is_the_instances_plus_the_additions(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    ours = (await gateway.get("/openapi/v1.json")).json()
    instances = []
    for backend in trio:
        async with backend.client() as direct:
            instances.append((await direct.get("/openapi/v1.json")).json())
    instance = instances[0]
    # Each process's own metrics are scraped from it, not through the gateway.
    assert "/metrics" in instance["paths"] and "/metrics" not in ours["paths"]
    for document in instances:
        del document["paths"]["/metrics"]
    # Bulk actions are served too: sent to every backend, their ids routed to their own.
    actions = ("/api/actions", "/api/actions/{id}", "/api/actions/{id}/cancel")
    assert all(path in instance["paths"] and path in ours["paths"] for path in actions)

    descriptor = ours["components"]["schemas"]["OperationDescriptor"]
    assert descriptor["properties"]["sourceService"]["type"] == "string"
    assert "sourceService" not in descriptor.get("required", [])
    parameters = ours["paths"]["/api/bulks"]["get"]["parameters"]
    source = next(p for p in parameters if p["name"] == "source")
    assert source["in"] == "query" and source["required"] is False

    without_additions = copy.deepcopy(ours)
    del without_additions["components"]["schemas"]["OperationDescriptor"]["properties"][
        "sourceService"
    ]
    listing = without_additions["paths"]["/api/bulks"]["get"]
    listing["parameters"] = [p for p in listing["parameters"] if p["name"] != "source"]
    # The forms offer every backend's operations; apart from those the documents are equal.
    for path in ("/api/bulks", "/api/bulks/validate"):
        offered = [_form(doc, path)["oneOf"] for doc in instances]
        assert _form(without_additions, path)["oneOf"] == [v for vs in offered for v in vs]
        assert len(offered) == 3 and all(offered)
        _form(without_additions, path)["oneOf"] = offered[0]
    union: dict[str, Any] = {}
    for doc in reversed(instances):
        union.update(doc["components"]["schemas"])
    assert without_additions["components"]["schemas"] == union
    without_additions["components"]["schemas"] = instance["components"]["schemas"]
    assert without_additions == instance
    assert _operation_ids(ours) == _operation_ids(instance)
    assert {"getBulks", "createBulk", "getBulkStatus", "exportBulk", "signalStep"} <= (
        _operation_ids(ours)
    )


async def test_every_documented_route_is_served(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    document = (await gateway.get("/openapi/v1.json")).json()
    for path, item in document["paths"].items():
        for method in item:
            concrete = path.replace("{id}", "00000000-0000-0000-0000-000000000000")
            concrete = concrete.replace("{name}", "no-such-operation").replace("{key}", "k")
            response = await gateway.request(method.upper(), concrete)
            # Routed somewhere: never the router's own "Not Found" or "Method Not Allowed".
            assert response.status_code != 405, (method, path)
            assert response.json() != {"error": "Not Found"}, (method, path)


def _form(document: dict[str, Any], path: str) -> dict[str, Any]:
    form: dict[str, Any] = document["paths"][path]["post"]["requestBody"]["content"][
        "multipart/form-data"
    ]["schema"]
    return form


async def test_the_description_can_be_turned_off(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, openapi_enabled=False)
    response = await gateway.get("/openapi/v1.json")
    assert response.status_code == 404 and "error" in response.json()
