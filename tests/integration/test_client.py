"""bulkops.client.AsyncClient against the app (ASGI transport): every helper and the typed
answers, errors as ApiError."""

from __future__ import annotations

import io
from typing import Any

import pytest

from bulkops.client import ApiError, AsyncClient, ErrorType, OperationStatus
from tests.integration.conftest import ClientFactory

META = {"requestedBy": "tests"}
GOOD_AND_BAD = "name,email,age\n" + "".join(
    f"P{n},{'bad' if n % 3 == 0 else f'p{n}@example.com'},{n}\n" for n in range(1, 31)
)


@pytest.fixture
async def bulkops(make_client: ClientFactory) -> Any:
    http = await make_client()
    async with AsyncClient("http://bulkops.test", transport=http._transport) as client:  # type: ignore[arg-type]
        yield client


async def test_submit_wait_and_read_back(bulkops: AsyncClient, tmp_path: Any) -> None:
    path = tmp_path / "people.csv"
    path.write_text(GOOD_AND_BAD)
    seen: list[str] = []

    operation_id = await bulkops.submit("record", path, {"requestedBy": "tests"})
    final = await bulkops.wait(
        operation_id, poll_interval=0.02, on_progress=lambda s: seen.append(s.status.value)
    )

    assert final.status is OperationStatus.COMPLETED_WITH_ERRORS and final.finished
    assert (final.processed_rows, final.total_rows, final.error_count) == (30, 30, 10)
    assert seen[-1] == "CompletedWithErrors"
    detail = await bulkops.get_bulk(operation_id)
    assert detail.file_name == "people.csv" and detail.successful_rows == 20
    failed = [row async for row in bulkops.iter_errors(operation_id, page_size=4)]
    assert [row.row_number for row in failed] == list(range(3, 31, 3))
    assert all(row.error_type is ErrorType.VALIDATION for row in failed)
    every = [row.row_number async for row in bulkops.iter_rows(operation_id, page_size=7)]
    assert every == list(range(1, 31))
    listed = await bulkops.get_bulks(operation_name="record")
    assert [item.id for item in listed.items] == [operation_id]
    out = io.BytesIO()
    assert await bulkops.get_bulk_file(operation_id, out) == len(GOOD_AND_BAD)
    assert out.getvalue().decode() == GOOD_AND_BAD
    exported = io.BytesIO()
    await bulkops.export_bulk(operation_id, exported, mode="data", state="Failed")
    assert exported.getvalue().decode().count("\n") == 11  # header + the failed rows


async def test_errors_are_api_errors_with_status_and_body(bulkops: AsyncClient) -> None:
    with pytest.raises(ApiError) as missing:
        await bulkops.get_bulk_status("00000000-0000-0000-0000-000000000000")
    assert missing.value.status_code == 404 and missing.value.refused
    assert "not found" in missing.value.message and missing.value.body["error"]
    with pytest.raises(ApiError) as unknown:
        await bulkops.submit("no-such-operation", io.BytesIO(b"name\nx\n"))
    assert unknown.value.status_code == 400


async def test_validate_returns_the_result_even_when_invalid(bulkops: AsyncClient) -> None:
    file = io.BytesIO(b"nom,email\nx,y\n")
    file.name = "people.csv"  # type: ignore[misc]

    result = await bulkops.validate_bulk("record", file, {"requestedBy": "me"})

    assert result.valid is False and result.file_errors


async def test_follow_events_resumes_from_its_cursor(bulkops: AsyncClient) -> None:
    first = await bulkops.submit("record", io.BytesIO(b"name,email\nA,a@example.com\n"), META)
    await bulkops.wait(first, poll_interval=0.02)
    seen = []
    async for event in bulkops.follow_events(since=0, poll_interval=0.02):
        seen.append(event)
        if event.type == "Completed":
            break
    cursor = seen[-1].sequence

    second = await bulkops.submit("record", io.BytesIO(b"name,email\nB,b@example.com\n"), META)
    resumed = []
    async for event in bulkops.follow_events(since=cursor, poll_interval=0.02):
        resumed.append(event)
        if event.type == "Completed":
            break

    assert {event.operation_id for event in seen} == {first}
    assert {event.operation_id for event in resumed} == {second}  # nothing repeated
    assert resumed[0].sequence == cursor + 1 and resumed[0].type == "Created"
