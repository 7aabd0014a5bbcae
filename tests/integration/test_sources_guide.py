"""The guide "Import files where they are" tells the truth: its commands run, its
allow list parses, and its Python sample imports a file once."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import httpx
import pytest
from examples.sources.monthly_import import import_monthly, save_supplier_mapping

import bulkops as bo
from bulkops.client import AsyncClient
from tests.integration.conftest import ClientFactory
from tests.source_server import source_server
from tests.unit.test_cli_client import NEW, Service, bulkops
from tests.unit.test_cli_client import service as service  # the fixture

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "sources.md"


def commands() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", GUIDE.read_text(), flags=re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def test_the_guides_allow_list_is_a_valid_setting() -> None:
    [line] = [c for c in commands() if c.startswith("export ")]
    value = line.split("=", 1)[1]
    assert bo.Settings(source_url_allow=value).source_url_allow == value.split(",")


def test_the_guides_commands_run(service: Service) -> None:
    saved = {"name": "acme", "columnMap": {"Full Name": "name", "E-Mail": "email"}}
    service.on("POST", "/api/bulks", {"operationId": NEW}, status=201)
    service.on("PUT", "/api/operations/import-users/mappings/acme", saved)
    service.on("GET", "/api/operations/import-users/mappings", {"items": [saved]})
    service.on(
        "GET",
        "/api/bulks",
        {"items": [], "page": 1, "pageSize": 25, "totalCount": 0, "hasNextPage": False},
    )
    ran = [c for c in commands() if c.startswith("bulkops ")]
    assert len(ran) == 6
    for command in ran:
        result = bulkops(*shlex.split(command)[1:])
        assert result.exit_code == 0, (command, result.output)
    sent = [r for r in service.seen if r.method == "POST"]
    assert all(b"sourceUrl" in r.read() for r in sent)


async def test_the_guides_sample_imports_a_file_once(
    make_client: ClientFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    with source_server() as server:
        server.files["/files/users.csv"] = b"Full Name,E-Mail\nAda,ada@example.com\n"
        http: httpx.AsyncClient = await make_client(source_url_allow=f"{server.base}/files/")
        async with AsyncClient("http://bulkops.test", transport=http._transport) as client:  # type: ignore[arg-type]
            await save_supplier_mapping(client, "record")
            url = f"{server.base}/files/users.csv"
            first = await import_monthly(client, "record", url)
            assert first is not None
            assert (await client.wait(first, poll_interval=0.02)).status.value == "Completed"
            assert await import_monthly(client, "record", url) is None
    assert f"Already imported as {first}" in capsys.readouterr().out
