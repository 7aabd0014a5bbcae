"""The ``priority`` form field of create: its bounds, and where it is shown."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bulkops.client import ApiError, AsyncClient
from tests.integration.conftest import ClientFactory, create_ok

GOOD_CSV = "name,email,age\nAda,ada@example.com,36\n"


@pytest.mark.parametrize("value", ["11", "-11", "100", "abc", "1.5", "", " 3 "])
async def test_priority_outside_minus_ten_to_ten_or_not_an_integer_is_refused(
    client: httpx.AsyncClient, value: str
) -> None:
    response = await client.post(
        "/api/bulks",
        data={"operationName": "record", "metadata": '{"requestedBy": "x"}', "priority": value},
        files={"file": ("rows.csv", GOOD_CSV.encode())},
    )
    if value.strip() in ("", "3"):  # blank is the default; spaces around a number are fine
        assert response.status_code == 201, response.text
        return
    assert response.status_code == 400, response.text
    assert "priority" in response.json()["error"]
    assert (await client.get("/api/bulks")).json()["totalCount"] == 0


@pytest.mark.parametrize(("value", "stored"), [(None, 0), ("-10", -10), ("10", 10), ("+4", 4)])
async def test_priority_is_stored_and_shown_in_detail_and_list(
    client: httpx.AsyncClient, value: str | None, stored: int
) -> None:
    extra = {} if value is None else {"priority": value}
    operation_id = await create_ok(client, GOOD_CSV, extra=extra)
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["priority"] == stored
    items = (await client.get("/api/bulks")).json()["items"]
    assert [item["priority"] for item in items if item["id"] == operation_id] == [stored]


async def test_the_client_submits_a_priority_and_reads_it_back(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    http = await make_client()
    path = tmp_path / "rows.csv"
    path.write_text(GOOD_CSV)
    async with AsyncClient("http://bulkops.test", transport=http._transport) as client:  # type: ignore[arg-type]
        operation_id = await client.submit("record", path, {"requestedBy": "x"}, priority=-4)
        assert (await client.get_bulk(operation_id)).priority == -4
        with pytest.raises(ApiError) as refused:
            await client.submit("record", path, {"requestedBy": "x"}, priority=11)
        assert refused.value.status_code == 400
