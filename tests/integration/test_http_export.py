"""Exporting rows over HTTP: report and data modes, formats, filters, errors, round trip."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import re
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

import bulkops as bo
from bulkops.formats import FileFormat, count_rows
from tests.integration import operations as ops
from tests.integration.conftest import ClientFactory, create_ok, runtime_of, wait_status

EXPORT_PATH = "/api/bulks/{id}/export"

MIXED_CSV = (
    "name,email,age\n"
    "Ada,ada@example.com,36\n"  # 1 ok
    "Bob,bob-at-example,3\n"  # 2 Validation (validate_row)
    "Cy,cy@example.com,old\n"  # 3 Validation (conversion)
    "boom,boom@example.com,1\n"  # 4 Processing
    "Dee,dee@example.com,\n"  # 5 ok
)

REPORT_HEADER = (
    "rowNumber,rowId,state,stepIndex,stepName,errorType,errorMessage,retryAttempt,completedAt"
)
DATA_HEADER = "name,email,age,_rowNumber,_state,_errorType,_errorMessage"
AGE_MESSAGE = (
    "age: Input should be a valid integer, unable to parse string as an integer (got 'old')"
)
UTC_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(autouse=True)
def created_apps(monkeypatch: pytest.MonkeyPatch) -> list[FastAPI]:
    """Every app the client fixtures build (the memory test streams from the last one)."""
    apps: list[FastAPI] = []
    original = bo.create_app

    def create_app(*args: Any, **kwargs: Any) -> FastAPI:
        app = original(*args, **kwargs)
        apps.append(app)
        return app

    monkeypatch.setattr(bo, "create_app", create_app)
    return apps


@pytest.fixture
async def mixed_id(client: httpx.AsyncClient) -> str:
    operation_id = await create_ok(client, MIXED_CSV)
    await wait_status(client, operation_id)
    return operation_id


async def export(client: httpx.AsyncClient, operation_id: str, **params: str) -> httpx.Response:
    response = await client.get(f"/api/bulks/{operation_id}/export", params=params)
    assert response.status_code == 200, response.text
    return response


def csv_rows(response: httpx.Response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.text)))


def jsonl(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines()]


def numbers(items: list[dict[str, Any]], key: str = "rowNumber") -> list[int]:
    return [int(item[key]) for item in items]


# --- report mode ------------------------------------------------------------------------


async def test_report_csv_lists_every_row_record_exactly(
    client: httpx.AsyncClient, mixed_id: str
) -> None:
    response = await export(client, mixed_id)
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["content-disposition"] == (
        f'attachment; filename="operation-{mixed_id}-report.csv"'
    )
    done = {int(r["rowNumber"]): r["completedAt"] for r in csv_rows(response)}
    assert all(UTC_TIMESTAMP.match(stamp) for stamp in done.values()), done
    # The same instants the rows endpoint reports for the rows whose step ran.
    progress = (await client.get(f"/api/bulks/{mixed_id}/rows")).json()["items"]
    for item in progress:
        if item["stepIndex"] >= 0:
            assert done[item["rowNumber"]] == item["steps"][0]["completedAt"]
    assert response.text == (
        f"{REPORT_HEADER}\r\n"
        f"1,ada@example.com,Completed,0,process,,,0,{done[1]}\r\n"
        f"2,bob-at-example,Failed,-1,validation,Validation,Invalid email 'bob-at-example',0,"
        f"{done[2]}\r\n"
        f'3,,Failed,-1,validation,Validation,"{AGE_MESSAGE}",0,{done[3]}\r\n'
        f"4,boom@example.com,Failed,0,process,Processing,exploded on purpose,0,{done[4]}\r\n"
        f"5,dee@example.com,Completed,0,process,,,0,{done[5]}\r\n"
    )


async def test_report_json_and_jsonl_omit_nulls(client: httpx.AsyncClient, mixed_id: str) -> None:
    as_json = await export(client, mixed_id, format="json")
    assert as_json.headers["content-type"] == "application/json"
    assert as_json.headers["content-disposition"] == (
        f'attachment; filename="operation-{mixed_id}-report.json"'
    )
    items = as_json.json()
    as_jsonl = await export(client, mixed_id, format="jsonl")
    assert as_jsonl.headers["content-type"] == "application/x-ndjson"
    assert as_jsonl.headers["content-disposition"] == (
        f'attachment; filename="operation-{mixed_id}-report.jsonl"'
    )
    assert jsonl(as_jsonl) == items
    assert numbers(items) == [1, 2, 3, 4, 5]
    # The same rows and values as the CSV report, whose null cells are empty.
    table = csv_rows(await export(client, mixed_id))
    assert [{k: str(v) for k, v in item.items()} for item in items] == [
        {k: v for k, v in row.items() if v != ""} for row in table
    ]
    ok, invalid, unconvertible, failed = items[0], items[1], items[2], items[3]
    assert UTC_TIMESTAMP.match(ok.pop("completedAt"))
    assert ok == {
        "rowNumber": 1,
        "rowId": "ada@example.com",
        "state": "Completed",
        "stepIndex": 0,
        "stepName": "process",
        "retryAttempt": 0,
    }
    assert invalid["stepIndex"] == -1 and invalid["stepName"] == "validation"
    assert invalid["errorType"] == "Validation"
    assert invalid["errorMessage"] == "Invalid email 'bob-at-example'"
    assert "rowId" not in unconvertible and unconvertible["errorMessage"] == AGE_MESSAGE
    assert failed["errorType"] == "Processing" and failed["errorMessage"] == "exploded on purpose"


async def test_filters_apply_while_streaming(client: httpx.AsyncClient, mixed_id: str) -> None:
    async def rows(**params: str) -> list[int]:
        return numbers(jsonl(await export(client, mixed_id, format="jsonl", **params)))

    assert await rows(state="failed") == [2, 3, 4]
    assert await rows(state="COMPLETED") == [1, 5]
    assert await rows(state="Bogus") == [1, 2, 3, 4, 5]
    assert await rows(errorType="processing") == [4]
    assert await rows(errorType="VALIDATION") == [2, 3]
    assert await rows(errorType="Bogus") == [1, 2, 3, 4, 5]
    assert await rows(stepName="validation") == [2, 3]
    assert await rows(stepName="process") == [1, 4, 5]
    assert await rows(stepName="Validation") == []
    assert await rows(state="failed", stepName="process") == [4]
    # Nothing matches: a CSV still has its header, JSON is an empty array.
    empty_csv = await export(client, mixed_id, stepName="nope")
    assert empty_csv.text == f"{REPORT_HEADER}\r\n"
    assert (await export(client, mixed_id, format="json", stepName="nope")).json() == []


async def test_report_mode_works_without_row_data(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, MIXED_CSV, operation="gated")
    await wait_status(client, operation_id)
    items = jsonl(await export(client, operation_id, format="jsonl", mode="REPORT"))
    assert numbers(items) == [1, 2, 3, 4, 5]
    assert [item["state"] for item in items][2] == "Failed"


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation_id", ["5d0c7a4e-8f3b-4c1d-9e2a-6b7f8c9d0e1f", "not-a-guid", "123"]
)
async def test_unknown_and_malformed_ids_are_404(
    client: httpx.AsyncClient, operation_id: str
) -> None:
    response = await client.get(f"/api/bulks/{operation_id}/export")
    assert response.status_code == 404
    assert response.json() == {"error": f"Operation {operation_id} not found"}


@pytest.mark.parametrize(
    ("params", "word"),
    [
        ({"mode": "xml"}, "mode"),
        ({"mode": ""}, "mode"),
        ({"format": "xml"}, "format"),
        ({"format": "", "mode": "data"}, "format"),
    ],
)
async def test_bad_mode_or_format_is_400(
    client: httpx.AsyncClient, mixed_id: str, params: dict[str, str], word: str
) -> None:
    response = await client.get(f"/api/bulks/{mixed_id}/export", params=params)
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"].startswith(f"Invalid {word} ")


async def test_data_mode_without_track_row_data_is_409(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, MIXED_CSV, operation="gated")
    await wait_status(client, operation_id)
    for fmt in ("csv", "json", "jsonl"):
        response = await client.get(
            f"/api/bulks/{operation_id}/export", params={"mode": "data", "format": fmt}
        )
        assert response.status_code == 409
        assert response.json() == {
            "error": "Export in data mode needs TrackRowData: "
            "operation 'gated' does not keep row data"
        }


async def test_data_mode_of_an_operation_no_longer_registered_is_409(
    make_client: ClientFactory,
) -> None:
    first = await make_client()
    operation_id = await create_ok(first, MIXED_CSV)
    await wait_status(first, operation_id)
    settings = runtime_of(first).settings
    # Another process on the same storage that does not serve `record` any more.
    second = await make_client(
        [ops.Gated], database_url=settings.database_url, files_url=settings.files_url
    )
    response = await second.get(f"/api/bulks/{operation_id}/export?mode=data")
    assert response.status_code == 409
    assert "operation 'record' does not keep row data" in response.json()["error"]
    assert (await second.get(f"/api/bulks/{operation_id}/export")).status_code == 200


async def test_openapi_names_the_export(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi/v1.json")).json()
    operation = document["paths"][EXPORT_PATH]["get"]
    assert operation["operationId"] == "exportBulk"
    names = {p["name"] for p in operation["parameters"]}
    assert {"id", "mode", "format", "state", "errorType", "stepName"} <= names
    assert {"200", "400", "404", "409"} <= set(operation["responses"])


# --- data mode --------------------------------------------------------------------------


async def test_data_csv_fix_and_reupload_round_trip(
    client: httpx.AsyncClient, mixed_id: str
) -> None:
    response = await export(client, mixed_id, mode="data", state="failed")
    assert response.headers["content-disposition"] == (
        f'attachment; filename="operation-{mixed_id}-data.csv"'
    )
    assert response.text == (
        f"{DATA_HEADER}\r\n"
        "Bob,bob-at-example,3,2,Failed,Validation,Invalid email 'bob-at-example'\r\n"
        f'Cy,cy@example.com,old,3,Failed,Validation,"{AGE_MESSAGE}"\r\n'
        "boom,boom@example.com,1,4,Failed,Processing,exploded on purpose\r\n"
    )

    # The user fixes the bad values in a spreadsheet and uploads the same file again.
    reader = csv.DictReader(io.StringIO(response.text))
    fixes = {"2": {"email": "bob@example.com"}, "3": {"age": "41"}, "4": {"name": "Boom"}}
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(reader.fieldnames or []))
    writer.writeheader()
    for row in reader:
        writer.writerow({**row, **fixes[row["_rowNumber"]]})
    ops.PROCESSED.clear()
    retry_id = await create_ok(client, out.getvalue(), file_name=f"operation-{mixed_id}-data.csv")
    status = await wait_status(client, retry_id)
    assert status["status"] == "Completed" and status["errorCount"] == 0
    assert status["processedRows"] == 3
    assert sorted(ops.PROCESSED) == ["Bob", "Boom", "Cy"]

    # Exporting the new operation replaces the old outcome columns instead of repeating them.
    again = await export(client, retry_id, mode="data")
    assert again.text.splitlines()[0] == DATA_HEADER
    assert [
        (r["name"], r["_rowNumber"], r["_state"], r["_errorType"]) for r in csv_rows(again)
    ] == [
        ("Bob", "1", "Completed", ""),
        ("Cy", "2", "Completed", ""),
        ("Boom", "3", "Completed", ""),
    ]


async def test_data_json_keeps_the_row_data_verbatim(
    client: httpx.AsyncClient, mixed_id: str
) -> None:
    as_json = await export(client, mixed_id, mode="data", format="json")
    assert as_json.headers["content-disposition"] == (
        f'attachment; filename="operation-{mixed_id}-data.json"'
    )
    items = as_json.json()
    assert jsonl(await export(client, mixed_id, mode="Data", format="JSONL")) == items
    assert items[0] == {
        "name": "Ada",
        "email": "ada@example.com",
        "age": "36",
        "_rowNumber": 1,
        "_state": "Completed",
    }
    assert items[3] == {
        "name": "boom",
        "email": "boom@example.com",
        "age": "1",
        "_rowNumber": 4,
        "_state": "Failed",
        "_errorType": "Processing",
        "_errorMessage": "exploded on purpose",
    }
    assert items[4]["age"] == ""
    failed = await export(client, mixed_id, mode="data", format="json", errorType="validation")
    assert numbers(failed.json(), "_rowNumber") == [2, 3]


async def test_data_csv_header_follows_the_model_then_the_first_rows_extra_keys(
    client: httpx.AsyncClient,
) -> None:
    content = (
        "Name,EMAIL,age,note\n"
        "Ada,ada@example.com,3,first\n"  # 1 ok
        "Bob,bob-at-example,4,second\n"  # 2 Validation
        "Eve,eve@example.com,5,x,surplus\n"  # 3 one field too many: kept as _extra
        '"Zed,zed@example.com,6\n'  # 4 unclosed quote: kept as _line
    )
    operation_id = await create_ok(client, content)
    await wait_status(client, operation_id)
    response = await export(client, operation_id, mode="data")
    assert response.text == (
        "name,email,age,note,_rowNumber,_state,_errorType,_errorMessage\r\n"
        "Ada,ada@example.com,3,first,1,Completed,,\r\n"
        "Bob,bob-at-example,4,second,2,Failed,Validation,Invalid email 'bob-at-example'\r\n"
        "Eve,eve@example.com,5,x,3,Failed,Validation,"
        '"Row 3: expected 4 fields, found 5"\r\n'
        ",,,,4,Failed,Validation,Row 4: unexpected end of data\r\n"
    )
    items = (await export(client, operation_id, mode="data", format="json")).json()
    assert items[0]["Name"] == "Ada" and items[0]["EMAIL"] == "ada@example.com"
    assert items[2]["_extra"] == ["surplus"]
    assert items[3]["_line"] == '"Zed,zed@example.com,6\n'


# --- streaming --------------------------------------------------------------------------


class StreamingTransport(httpx.AsyncBaseTransport):
    """Hands an ASGI app's response body over chunk by chunk through a small queue.

    ``httpx.ASGITransport`` collects the whole body before it returns, which would hide how
    much memory the server side of an export needs.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "server": (request.url.host, request.url.port or 80),
            "client": ("127.0.0.1", 50000),
            "root_path": "",
        }
        started: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=2)
        closed = asyncio.Event()
        asked = False

        async def receive() -> dict[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await closed.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.set_result(message)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await chunks.put(message["body"])
                if not message.get("more_body", False):
                    await chunks.put(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                if not started.done():
                    started.set_exception(RuntimeError("the app sent no response"))

        task = asyncio.create_task(run())
        start = await started
        return httpx.Response(
            start["status"], headers=start.get("headers", []), stream=_Body(chunks, task, closed)
        )


class _Body(httpx.AsyncByteStream):
    def __init__(
        self, chunks: asyncio.Queue[bytes | None], task: asyncio.Task[None], closed: asyncio.Event
    ) -> None:
        self._chunks, self._task, self._closed = chunks, task, closed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self._chunks.get()) is not None:
            yield chunk

    async def aclose(self) -> None:
        self._closed.set()
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.contextmanager
def traced() -> Iterator[Callable[[], int]]:
    """Trace allocations; yields a function returning the peak so far in bytes."""
    tracemalloc.start()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_a_large_export_streams_in_bounded_memory(
    make_client: ClientFactory, created_apps: list[FastAPI], tmp_path: Path
) -> None:
    total = 100_000
    client = await make_client(flush_rows=5000)
    content = "name,email,age\n" + "".join(
        f"user{i},user{i}@example.com,{i % 90}\n" for i in range(total)
    )
    operation_id = await create_ok(client, content)
    status = await wait_status(client, operation_id, timeout=60)
    assert status["status"] == "Completed" and status["processedRows"] == total
    del content

    size = lines = 0
    first = last = b""
    streaming = httpx.AsyncClient(
        transport=StreamingTransport(created_apps[-1]), base_url="http://bulkops.test"
    )
    async with streaming:
        with traced() as peak:
            async with streaming.stream("GET", f"/api/bulks/{operation_id}/export") as response:
                assert response.status_code == 200
                async for chunk in response.aiter_raw():
                    first = first or chunk
                    size += len(chunk)
                    lines += chunk.count(b"\n")
                    last = chunk
            peak_bytes = peak()

    assert lines == total + 1
    assert first.startswith(REPORT_HEADER.encode() + b"\r\n1,user0@example.com,Completed,")
    assert last.rsplit(b"\r\n", 2)[-2].startswith(b"100000,user99999@example.com,Completed,")
    assert size > 5 * 1024 * 1024
    # Flat memory: the whole export never sits in memory, only a batch of rows and a chunk.
    assert peak_bytes < 20 * 1024 * 1024
    assert peak_bytes < size / 2, (peak_bytes, size)

    # The same as a workbook: written as the rows come, its bytes sent as they are made.
    book = tmp_path / "export.xlsx"
    chunks = 0
    streaming = httpx.AsyncClient(
        transport=StreamingTransport(created_apps[-1]), base_url="http://bulkops.test"
    )
    async with streaming:
        with traced() as peak, book.open("wb") as out:
            url = f"/api/bulks/{operation_id}/export?format=xlsx"
            async with streaming.stream("GET", url) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_raw():
                    chunks += 1
                    out.write(chunk)
            peak_bytes = peak()
    assert chunks > 10  # streamed, not made whole and then sent
    assert count_rows(book, FileFormat.XLSX) == total
    assert peak_bytes < 20 * 1024 * 1024
