"""Every stored file's SHA-256: detail, list items and filter, validate's duplicateOf,
create's rejectDuplicate; on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from tests.integration.conftest import create, create_ok

CSV = "name,email\nAda,ada@example.com\nBob,bob@example.com\n"
OTHER = "name,email\nCy,cy@example.com\n"
META = '{"requestedBy": "tests"}'


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def validate(client: httpx.AsyncClient, content: str, **extra: str) -> httpx.Response:
    data = {"operationName": "record", "metadata": META, **extra}
    return await client.post(
        "/api/bulks/validate", data=data, files={"file": ("rows.csv", content, "text/csv")}
    )


async def test_the_hash_is_shown_and_filters_the_list(client: httpx.AsyncClient) -> None:
    first = await create_ok(client, CSV)
    await create_ok(client, OTHER)
    detail = (await client.get(f"/api/bulks/{first}")).json()
    assert detail["fileSha256"] == sha(CSV)
    listed = (await client.get("/api/bulks", params={"fileSha256": sha(CSV).upper()})).json()
    assert [item["id"] for item in listed["items"]] == [first]
    assert listed["items"][0]["fileSha256"] == sha(CSV)
    assert (await client.get("/api/bulks", params={"fileSha256": "nothex"})).status_code == 400


async def test_validate_names_the_newest_duplicate(client: httpx.AsyncClient) -> None:
    fresh = await validate(client, CSV)
    assert fresh.status_code == 200, fresh.text
    assert "duplicateOf" not in fresh.json()
    await create_ok(client, CSV)
    newest = await create_ok(client, CSV)
    answer = await validate(client, CSV)
    assert answer.status_code == 200
    assert answer.json()["duplicateOf"] == newest
    assert "duplicateOf" not in (await validate(client, OTHER)).json()


async def test_reject_duplicate_is_409_naming_it_and_stores_nothing(
    client: httpx.AsyncClient,
) -> None:
    first = await create_ok(client, CSV, extra={"rejectDuplicate": "true"})
    refused = await create(client, CSV, metadata=META, extra={"rejectDuplicate": "true"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["duplicateOf"] == first
    assert first in refused.json()["error"]
    assert (await client.get("/api/bulks")).json()["totalCount"] == 1
    # Without the flag the same file is accepted; another operation's hash is no duplicate.
    await create_ok(client, CSV)
    bad = await create(client, CSV, metadata=META, extra={"rejectDuplicate": "maybe"})
    assert bad.status_code == 400


async def test_a_reject_duplicate_create_sent_again_under_its_key_is_replayed(
    client: httpx.AsyncClient,
) -> None:
    async def send(key: str, content: str = CSV) -> httpx.Response:
        return await client.post(
            "/api/bulks",
            data={"operationName": "record", "metadata": META, "rejectDuplicate": "true"},
            files={"file": ("rows.csv", content, "text/csv")},
            headers={"Idempotency-Key": key},
        )

    first = await send("dup-1")
    assert first.status_code == 201, first.text
    again = await send("dup-1")
    assert again.status_code == 201, again.text
    assert again.json()["operationId"] == first.json()["operationId"]
    assert again.headers["Idempotent-Replayed"] == "true"
    # Another key is a new request: its file is a duplicate; the key with another file is 422.
    other_key = await send("dup-2")
    assert other_key.status_code == 409, other_key.text
    assert other_key.json()["duplicateOf"] == first.json()["operationId"]
    assert (await send("dup-1", OTHER)).status_code == 422
    assert (await client.get("/api/bulks")).json()["totalCount"] == 1


@pytest.mark.parametrize("flag", ["true", "TRUE"])
async def test_a_run_from_an_earlier_operation_keeps_its_hash(
    client: httpx.AsyncClient, flag: str
) -> None:
    first = await create_ok(client, CSV)
    again = await client.post(
        "/api/bulks",
        data={"operationName": "record", "sourceOperationId": first, "rejectDuplicate": "false"},
    )
    assert again.status_code == 201, again.text
    second = again.json()["operationId"]
    assert (await client.get(f"/api/bulks/{second}")).json()["fileSha256"] == sha(CSV)
    refused = await client.post(
        "/api/bulks",
        data={"operationName": "record", "sourceOperationId": first, "rejectDuplicate": flag},
    )
    assert refused.status_code == 409
    assert refused.json()["duplicateOf"] == second
