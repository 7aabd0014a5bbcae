"""``bulkops usage`` against a fake service."""

from __future__ import annotations

import json

from tests.unit.test_cli_client import Service, bulkops, service  # noqa: F401 (fixture)

USAGE = {
    "days": 30,
    "items": [
        {
            "tenant": "acme",
            "day": "2026-11-28",
            "operationsCreated": 2,
            "rowsSubmitted": 300,
            "rowsProcessed": 250,
            "bytesStored": 4096,
        },
        {
            "day": "2026-11-27",
            "operationsCreated": 1,
            "rowsSubmitted": 10,
            "rowsProcessed": 10,
            "bytesStored": 99,
        },
    ],
}


def test_usage_prints_tenant_days(service: Service) -> None:  # noqa: F811
    service.on("GET", "/api/usage", USAGE)

    result = bulkops("usage")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == [
        "day",
        "tenant",
        "operationsCreated",
        "rowsSubmitted",
        "rowsProcessed",
        "bytesStored",
    ]
    assert lines[1].split("\t") == ["2026-11-28", "acme", "2", "300", "250", "4096"]
    assert lines[2].split("\t") == ["2026-11-27", "", "1", "10", "10", "99"]


def test_usage_of_one_tenant_as_json(service: Service) -> None:  # noqa: F811
    service.on("GET", "/api/usage", USAGE)

    result = bulkops("usage", "--tenant", "acme", "--json")

    assert result.exit_code == 0, result.output
    [request] = service.requests("GET", "/api/usage")
    assert request.url.params["tenant"] == "acme"
    assert json.loads(result.stdout) == USAGE
