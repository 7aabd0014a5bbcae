"""The command line's saved mappings and ``submit --source-url / --mapping /
--reject-duplicate`` against a fake service: the requests each command sends."""

from __future__ import annotations

import json
from urllib.parse import unquote

import httpx

from tests.unit.test_cli_client import NEW, Service, bulkops, fields
from tests.unit.test_cli_client import service as service  # the fixture

MAPPINGS = "/api/operations/import-users/mappings"


def test_submit_from_a_source_url_keeps_url_for_the_service(service: Service) -> None:
    service.on("POST", "/api/bulks", {"operationId": NEW}, status=201)
    result = bulkops(
        "submit",
        "--source-url",
        "s3://exports/2026/users.csv",
        "-o",
        "import-users",
        "--mapping",
        "supplier a",
        "--reject-duplicate",
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == NEW
    (sent,) = service.requests("POST", "/api/bulks")
    assert str(sent.url).startswith("http://bulkops.test/")  # --url: the service, as ever
    assert fields(sent) == {
        "operationName": "import-users",
        "metadata": "{}",
        "sourceUrl": "s3://exports/2026/users.csv",
        "mapping": "supplier a",
        "rejectDuplicate": "true",
    }


def test_submit_takes_one_origin(service: Service, tmp_path: object) -> None:
    both = bulkops("submit", "--source-url", "https://x.test/a.csv", "--from", NEW)
    assert both.exit_code == 2 and "one of them" in both.output
    nameless = bulkops("submit", "--source-url", "https://x.test/a.csv")
    assert nameless.exit_code == 2 and "--operation" in nameless.output
    assert service.seen == []


def test_mapping_commands(service: Service) -> None:
    saved = {"name": "supplier a", "columnMap": {"E-Mail": "email"}}
    service.on("PUT", f"{MAPPINGS}/supplier a", saved)
    service.on("GET", MAPPINGS, {"items": [saved]})
    service.on("DELETE", f"{MAPPINGS}/supplier a", lambda _: httpx.Response(204))
    result = bulkops(
        "mapping-save", "import-users", "supplier a", "--column-map", '{"E-Mail": "email"}'
    )
    assert result.exit_code == 0, result.output
    (put,) = service.requests("PUT", f"{MAPPINGS}/supplier a")
    assert json.loads(put.content) == {"columnMap": {"E-Mail": "email"}}
    assert "%20" in str(put.url) and unquote(put.url.path).endswith("/supplier a")
    listed = bulkops("mappings", "import-users", "--json")
    assert listed.exit_code == 0
    assert json.loads(listed.output) == {"items": [saved]}
    deleted = bulkops("mapping-delete", "import-users", "supplier a")
    assert deleted.exit_code == 0 and "Deleted" in deleted.output
    refused = bulkops("mapping-save", "import-users", "x", "--column-map", "[1]")
    assert refused.exit_code == 2
