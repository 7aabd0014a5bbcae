"""XLSX workbooks and gzip-compressed files through HTTP: validate, create, process, download,
template and export."""

from __future__ import annotations

import gzip
import io
import json
from datetime import date, datetime
from typing import Any

import httpx
import pytest
from openpyxl import Workbook, load_workbook

from tests.integration import chunk_operations
from tests.integration.conftest import (
    ClientFactory,
    create_ok,
    wait_status,
)

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def workbook(*sheets: tuple[str, list[list[Any]]]) -> bytes:
    """An XLSX file with the given sheets (name, rows), written by openpyxl."""
    book = Workbook()
    book.remove(book.active)
    for name, rows in sheets:
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


PEOPLE = [
    ["name", "email", "age"],
    ["Ada", "ada@example.com", 36],
    [None, None, None],
    ["Alan", "alan@example.com", 41.0],
]


async def data_of(client: httpx.AsyncClient, operation_id: str) -> list[tuple[int, Any]]:
    """(row number, row data) of every row, from the data export as JSON Lines."""
    response = await client.get(f"/api/bulks/{operation_id}/export?mode=data&format=jsonl")
    assert response.status_code == 200, response.text
    found = []
    for line in response.text.splitlines():
        item = json.loads(line)
        number = item.pop("_rowNumber")
        found.append((number, {k: v for k, v in item.items() if not k.startswith("_")}))
    return found


async def test_an_xlsx_file_is_read_from_its_first_sheet(client: httpx.AsyncClient) -> None:
    content = workbook(("People", PEOPLE), ("Other", [["name"], ["nobody"]]))
    operation_id = await create_ok(client, content, file_name="people.xlsx", content_type=XLSX)

    status = await wait_status(client, operation_id)

    assert status["status"] == "Completed"
    assert status["totalRows"] == 2  # the empty row is skipped
    assert await data_of(client, operation_id) == [
        (1, {"name": "Ada", "email": "ada@example.com", "age": "36"}),
        (2, {"name": "Alan", "email": "alan@example.com", "age": "41"}),
    ]
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["fileName"] == "people.xlsx"


async def test_the_sheet_field_chooses_the_worksheet(client: httpx.AsyncClient) -> None:
    content = workbook(("Notes", [["just a note"]]), ("People", PEOPLE))
    for sheet in ("People", "people"):  # exact, else case-insensitive
        operation_id = await create_ok(
            client, content, file_name="book.xlsx", content_type=XLSX, extra={"sheet": sheet}
        )
        status = await wait_status(client, operation_id)
        assert (status["status"], status["totalRows"]) == ("Completed", 2)


async def test_an_unknown_sheet_is_400_naming_the_sheets(client: httpx.AsyncClient) -> None:
    content = workbook(("People", PEOPLE), ("Other", [["name"]]))
    form = {"operationName": "record", "metadata": '{"requestedBy": "x"}', "sheet": "Nope"}
    for path in ("/api/bulks", "/api/bulks/validate"):
        response = await client.post(path, data=form, files={"file": ("book.xlsx", content, XLSX)})
        assert response.status_code == 400, response.text
        body = response.json()
        assert "'Nope'" in body["error"] and "'People', 'Other'" in body["error"]
        assert body["sheets"] == ["People", "Other"]
    listed = (await client.get("/api/bulks")).json()
    assert listed["items"] == []


async def test_validate_checks_the_chosen_sheet(client: httpx.AsyncClient) -> None:
    bad = [["name", "email"], ["Ada", "not-an-email"], ["Alan", "alan@example.com"]]
    content = workbook(("Good", PEOPLE), ("Bad", bad))
    form = {"operationName": "record", "metadata": '{"requestedBy": "x"}'}
    files = {"file": ("book.xlsx", content, XLSX)}
    good = await client.post("/api/bulks/validate", data=form, files=files)
    assert good.status_code == 200, good.text
    checked = await client.post("/api/bulks/validate", data={**form, "sheet": "Bad"}, files=files)
    assert checked.status_code == 422
    assert checked.json()["fileErrors"] == ["Row 1: Invalid email 'not-an-email'"]


async def test_a_broken_workbook_is_a_file_error(client: httpx.AsyncClient) -> None:
    form = {"operationName": "record", "metadata": '{"requestedBy": "x"}'}
    files = {"file": ("book.xlsx", b"PK\x03\x04 not really a zip", XLSX)}
    checked = await client.post("/api/bulks/validate", data=form, files=files)
    assert checked.status_code == 422
    [error] = checked.json()["fileErrors"]
    assert error.startswith("The file is not a readable XLSX workbook")
    created = await client.post("/api/bulks", data=form, files=files)
    assert created.status_code == 422
    assert created.json()["error"].startswith("The file is not a readable XLSX workbook")
    assert created.json()["fileErrors"] == [created.json()["error"]]


async def test_the_content_type_alone_names_an_xlsx_file(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(
        client, workbook(("People", PEOPLE)), file_name="upload", content_type=XLSX
    )
    status = await wait_status(client, operation_id)
    assert (status["status"], status["totalRows"]) == ("Completed", 2)


async def test_rows_that_fail_in_a_workbook_are_numbered_as_in_the_sheet(
    client: httpx.AsyncClient,
) -> None:
    rows = [
        [None],
        ["Name", "Email", "Age", "Notes"],  # the header need not be in row 1
        ["Ada", "ada@example.com", "x"],
        [],
        ["boom", "boom@example.com", 3, "fails in process_row"],
        ["Grace", "grace@example.com", None],
    ]
    operation_id = await create_ok(
        client, workbook(("S", rows)), file_name="people.xlsx", content_type=XLSX
    )
    status = await wait_status(client, operation_id)
    assert (status["status"], status["totalRows"], status["errorCount"]) == (
        "CompletedWithErrors",
        3,
        2,
    )
    errors = (await client.get(f"/api/bulks/{operation_id}/errors")).json()["items"]
    assert [(e["rowNumber"], e["errorType"]) for e in errors] == [
        (1, "Validation"),
        (2, "Processing"),
    ]
    assert errors[0]["rowData"] == {"Name": "Ada", "Email": "ada@example.com", "Age": "x"}


def gz(data: bytes) -> bytes:
    return gzip.compress(data)


CSV = "name,email,age\nAda,ada@example.com,36\nAlan,alan@example.com,41\n"
JSONL = '{"name":"Ada","email":"ada@example.com"}\n{"name":"Alan","email":"alan@example.com"}\n'


@pytest.mark.parametrize(
    ("file_name", "content_type", "content"),
    [
        ("rows.csv.gz", "application/gzip", CSV),
        ("rows.CSV.GZ", "application/octet-stream", CSV),
        ("rows.csv", "application/gzip", CSV),
        ("rows.jsonl.gz", "application/gzip", JSONL),
        ("rows.json.gz", "application/x-gzip", json.dumps([json.loads(x) for x in JSONL.split()])),
    ],
)
async def test_gzip_files_are_read_decompressed_and_downloaded_as_uploaded(
    client: httpx.AsyncClient, file_name: str, content_type: str, content: str
) -> None:
    compressed = gz(content.encode())
    form = {"operationName": "record", "metadata": '{"requestedBy": "x"}'}
    files = {"file": (file_name, compressed, content_type)}
    checked = await client.post("/api/bulks/validate", data=form, files=files)
    assert checked.status_code == 200, checked.text

    operation_id = await create_ok(
        client, compressed, file_name=file_name, content_type=content_type
    )
    status = await wait_status(client, operation_id)

    assert (status["status"], status["totalRows"]) == ("Completed", 2)
    assert [data["name"] for _, data in await data_of(client, operation_id)] == ["Ada", "Alan"]
    download = await client.get(f"/api/bulks/{operation_id}/file")
    assert download.status_code == 200
    assert download.content == compressed  # as uploaded
    assert file_name in download.headers["content-disposition"]


async def test_a_corrupt_gzip_stream_is_a_file_error(client: httpx.AsyncClient) -> None:
    whole = gz((CSV * 2000).encode())
    broken = whole[: len(whole) // 2]  # cut short
    form = {"operationName": "record", "metadata": '{"requestedBy": "x"}'}
    garbage = b"\x1f\x8b\x08\x00" + b"\xff" * 64
    for content in (broken, garbage):
        files = {"file": ("rows.csv.gz", content, "application/gzip")}
        checked = await client.post("/api/bulks/validate", data=form, files=files)
        assert checked.status_code == 422, checked.text
        assert any("not a valid gzip stream" in e for e in checked.json()["fileErrors"])

        operation_id = await create_ok(client, content, file_name="rows.csv.gz")
        status = await wait_status(client, operation_id)
        assert status["status"] == "Failed"
        detail = (await client.get(f"/api/bulks/{operation_id}")).json()
        assert "not a valid gzip stream" in detail["errorMessage"]


async def test_the_xlsx_template_holds_the_header_row(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/operations/record/template?format=xlsx")

    assert response.status_code == 200
    assert response.headers["content-type"] == XLSX
    assert 'filename="record-template.xlsx"' in response.headers["content-disposition"]
    book = load_workbook(io.BytesIO(response.content), read_only=True)
    assert [list(row) for row in book.worksheets[0].iter_rows(values_only=True)] == [
        ["name", "email", "age"]
    ]
    csv_template = await client.get("/api/operations/record/template")
    assert csv_template.text == "name,email,age\r\n"
    assert (await client.get("/api/operations/record/template?format=pdf")).status_code == 400


async def test_export_as_xlsx_reads_back_and_round_trips(client: httpx.AsyncClient) -> None:
    source = [["name", "email", "age"], ["Ada", "ada@example.com", 36], ["Bob", "bob", 7]]
    operation_id = await create_ok(
        client, workbook(("S", source)), file_name="p.xlsx", content_type=XLSX
    )
    await wait_status(client, operation_id)

    report = await client.get(f"/api/bulks/{operation_id}/export?format=xlsx")
    assert report.status_code == 200
    assert report.headers["content-type"] == XLSX
    assert f"operation-{operation_id}-report.xlsx" in report.headers["content-disposition"]
    rows = list(load_workbook(io.BytesIO(report.content)).worksheets[0].values)
    assert rows[0][:3] == ("rowNumber", "rowId", "state")
    assert [(r[0], r[2]) for r in rows[1:]] == [(1, "Completed"), (2, "Failed")]

    data = await client.get(f"/api/bulks/{operation_id}/export?mode=data&format=xlsx&state=Failed")
    rows = list(load_workbook(io.BytesIO(data.content)).worksheets[0].values)
    assert rows[0] == (
        "name",
        "email",
        "age",
        "_rowNumber",
        "_state",
        "_errorType",
        "_errorMessage",
    )
    assert rows[1][:5] == ("Bob", "bob", "7", 2, "Failed")
    # The failed rows' export goes back in as a new upload.
    again = await create_ok(client, data.content, file_name="failed.xlsx", content_type=XLSX)
    status = await wait_status(client, again)
    assert (status["totalRows"], status["errorCount"]) == (1, 1)


async def test_an_xlsx_file_is_processed_in_chunks(make_client: ClientFactory) -> None:
    chunk_operations.reset()
    client = await make_client(
        chunk_operations.ALL, chunk_rows=7, worker_count=3, max_row_concurrency=2
    )
    names = [f"row{n}" for n in range(1, 51)]
    rows: list[list[Any]] = [["name"]]
    for n, name in enumerate(names, 1):
        rows.append([name])
        if n % 9 == 0:
            rows.append([None])  # empty rows are not counted, wherever they are
    operation_id = await create_ok(
        client, workbook(("S", rows)), operation="chunked", metadata={}, file_name="c.xlsx"
    )

    status = await wait_status(client, operation_id)

    assert (status["status"], status["totalRows"], status["processedRows"]) == (
        "Completed",
        50,
        50,
    )
    assert chunk_operations.PROCESSED == dict.fromkeys(names, 1)
    numbered = {number: data["name"] for number, data in await data_of(client, operation_id)}
    assert numbered == {n: f"row{n}" for n in range(1, 51)}
    events = (await client.get(f"/api/bulks/{operation_id}/events?limit=100")).json()
    assert any("split into 8 chunks" in (e.get("message") or "") for e in events)


async def test_cells_read_as_csv_cells_would(client: httpx.AsyncClient) -> None:
    rows = [
        ["name", "email", "age"],
        ["Ada", "ada@example.com", 3.0],
        [date(2024, 1, 5), "b@example.com", True],
        [datetime(2024, 1, 5, 10, 30), "c@example.com", 2.5],
    ]
    operation_id = await create_ok(client, workbook(("S", rows)), file_name="c.xlsx")
    await wait_status(client, operation_id)

    found = dict(await data_of(client, operation_id))
    assert found[1] == {"name": "Ada", "email": "ada@example.com", "age": "3"}
    assert found[2] == {"name": "2024-01-05", "email": "b@example.com", "age": "true"}
    assert found[3] == {"name": "2024-01-05T10:30:00", "email": "c@example.com", "age": "2.5"}


@pytest.mark.parametrize(
    ("file_name", "content_type"),
    [("rows.csv.gz", "text/csv"), ("rows.csv", "application/gzip")],
)
async def test_a_plain_file_declared_gzip_is_a_file_error(
    client: httpx.AsyncClient, file_name: str, content_type: str
) -> None:
    form = {"operationName": "record", "metadata": '{"requestedBy": "x"}'}
    files = {"file": (file_name, CSV.encode(), content_type)}
    checked = await client.post("/api/bulks/validate", data=form, files=files)
    assert checked.status_code == 422
    assert checked.json()["fileErrors"][0].startswith("The file is not a valid gzip stream")
    created = await client.post("/api/bulks", data=form, files=files)
    assert created.status_code == 422
    assert created.json()["error"].startswith("The file is not a valid gzip stream")
    listed = await client.get("/api/bulks")
    assert listed.json()["totalCount"] == 0


@pytest.mark.parametrize(
    "query",
    [
        "/api/operations/record/template?format=",
        "/api/operations/record/template?format=%20",
        "/api/operations/record/template?format=pdf",
    ],
)
async def test_a_value_outside_the_templates_format_enum_is_400(
    client: httpx.AsyncClient, query: str
) -> None:
    """The description lists csv and xlsx: an empty value is outside it like any other."""
    response = await client.get(query)
    assert response.status_code == 400, response.text
    assert "format" in response.json()["error"]
