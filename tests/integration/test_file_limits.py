"""Limits that hold over HTTP: a decompression bomb (gzip, XLSX) and a file of too many
rows are refused by validate (413 naming the limit) and fail their operation while its
rows are counted, before any row runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.bombs import gzip_csv_bomb, xlsx_bomb
from tests.integration import operations as ops
from tests.integration.conftest import ClientFactory, create, wait_status

UPLOAD_LIMIT = 512 * 1024
EXPANDED_LIMIT = 1024 * 1024
META = {"requestedBy": "tests"}
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {
        "max_upload_bytes": UPLOAD_LIMIT,
        "max_expanded_bytes": EXPANDED_LIMIT,
        "max_file_rows": 50_000,
    }
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(**options)


async def _validate(
    client: httpx.AsyncClient, content: bytes, file_name: str, content_type: str
) -> httpx.Response:
    return await client.post(
        "/api/bulks/validate",
        data={"operationName": "record", "metadata": json.dumps({"requestedBy": "t"})},
        files={"file": (file_name, content, content_type)},
    )


async def _refused(
    client: httpx.AsyncClient, content: bytes, file_name: str, content_type: str, setting: str
) -> None:
    checked = await _validate(client, content, file_name, content_type)
    assert checked.status_code == 413, checked.text
    assert setting in checked.json()["error"]
    created = await create(
        client, content, file_name=file_name, content_type=content_type, metadata=META
    )
    assert created.status_code == 201, created.text
    operation_id = created.json()["operationId"]
    await wait_status(client, operation_id)
    body = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert body["status"] == "Failed"
    assert setting in body["errorMessage"]
    assert body["processedRows"] == 0 and ops.PROCESSED == []
    rows = (await client.get(f"/api/bulks/{operation_id}/rows")).json()
    assert rows["items"] == []


async def test_a_gzip_bomb_is_refused(client: httpx.AsyncClient, tmp_path: Path) -> None:
    bomb = gzip_csv_bomb(tmp_path / "bomb.csv.gz", 1_000_000).read_bytes()
    assert len(bomb) < UPLOAD_LIMIT  # within the upload limit: only its expansion is not
    await _refused(client, bomb, "bomb.csv.gz", "application/gzip", "BULKOPS_MAX_EXPANDED_BYTES")
    checked = await _validate(client, bomb, "bomb.csv.gz", "application/gzip")
    assert f"limit is {EXPANDED_LIMIT} bytes" in checked.json()["error"]


@pytest.mark.parametrize("part", ["sheet", "strings"])
async def test_an_xlsx_bomb_is_refused(
    client: httpx.AsyncClient, tmp_path: Path, part: str
) -> None:
    bomb = xlsx_bomb(tmp_path / "bomb.xlsx", 200_000, part=part).read_bytes()
    assert len(bomb) < UPLOAD_LIMIT
    await _refused(client, bomb, "bomb.xlsx", XLSX_TYPE, "BULKOPS_MAX_EXPANDED_BYTES")


async def test_a_file_of_too_many_rows_is_refused(client: httpx.AsyncClient) -> None:
    content = ("name,email\n" + "a,a@x.io\n" * 50_001).encode()
    await _refused(client, content, "rows.csv", "text/csv", "BULKOPS_MAX_FILE_ROWS")


async def test_files_within_the_limits_pass(client: httpx.AsyncClient, tmp_path: Path) -> None:
    small = gzip_csv_bomb(tmp_path / "small.csv.gz", 20_000).read_bytes()  # 460 KB expanded
    assert (await _validate(client, small, "small.csv.gz", "application/gzip")).status_code == 200
    created = await create(
        client, small, file_name="small.csv.gz", content_type="application/gzip", metadata=META
    )
    body = await wait_status(client, created.json()["operationId"], timeout=60)
    assert body["status"] == "Completed" and body["processedRows"] == 20_000
