"""A query value outside the enum the API description gives (an empty one included) is
refused with 400 or 422, on every route: the routes are read from the served description,
so a route added later is checked too."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.integration.conftest import create_ok, wait_status

OUTSIDE = ["", "not-a-listed-value"]


def enum_queries(document: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    """(method, path, parameter, allowed values) of every query parameter with an enum."""
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                values = schema.get("enum") or next(
                    (s["enum"] for s in schema.get("anyOf", []) if "enum" in s), None
                )
                if parameter.get("in") == "query" and values:
                    found.append((method.upper(), path, parameter["name"], values))
    return found


async def test_values_outside_an_enum_are_refused(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi/v1.json")).json()
    checked = enum_queries(document)
    assert {(p, n) for _, p, n, _ in checked} >= {
        ("/api/operations/{name}/template", "format"),
        ("/api/bulks/{id}/export", "format"),
        ("/api/bulks/{id}/export", "mode"),
    }
    operation_id = await create_ok(client, "name,email\nann,ann@example.com\n")
    await wait_status(client, operation_id)
    names = {"id": operation_id, "name": "record", "rowNumber": "1", "key": "ann"}
    for method, path, name, allowed in checked:
        target = re.sub(r"\{(\w+)\}", lambda m: names.get(m[1], "x"), path)
        for value in [*OUTSIDE, *(v.upper() + "!" for v in allowed[:1])]:
            response = await client.request(method, target, params={name: value})
            assert response.status_code in (400, 422), (method, path, name, value, response.text)
        # The listed values themselves are accepted.
        assert (await client.request(method, target, params={name: allowed[0]})).status_code < 400


async def test_enum_values_are_read_in_any_case_as_the_description_says(
    client: httpx.AsyncClient,
) -> None:
    # The listed spellings are the canonical ones; the description promises any case (and
    # surrounding spaces ignored), which earlier versions accepted.
    document = (await client.get("/openapi/v1.json")).json()
    operation_id = await create_ok(client, "name,email\nann,ann@example.com\n")
    await wait_status(client, operation_id)
    names = {"id": operation_id, "name": "record", "rowNumber": "1", "key": "ann"}
    operations = {
        (method.upper(), path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict)
    }
    for method, path, name, allowed in enum_queries(document):
        parameter = next(p for p in operations[method, path]["parameters"] if p["name"] == name)
        assert "in any case" in parameter["description"], (path, name)
        target = re.sub(r"\{(\w+)\}", lambda m: names.get(m[1], "x"), path)
        for value in (allowed[0].upper(), f" {allowed[-1].title()} "):
            response = await client.request(method, target, params={name: value})
            assert response.status_code == 200, (method, path, name, value, response.text)
