"""POST /api/bulks and /api/bulks/validate: success, and every refusal before storing."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.conftest import ClientFactory, create, create_ok, runtime_of, wait_status

GOOD_CSV = "name,email,age\nAda,ada@example.com,36\nAlan,alan@example.com,\n"


async def stored_operations(client: httpx.AsyncClient) -> int:
    body = (await client.get("/api/bulks")).json()
    return int(body["totalCount"])


async def test_create_answers_201_with_location_and_stores_a_pending_record(
    client: httpx.AsyncClient,
) -> None:
    response = await create(client, GOOD_CSV, metadata={"requestedBy": "ann"})
    assert response.status_code == 201
    operation_id = response.json()["operationId"]
    assert response.headers["location"] == f"/api/bulks/{operation_id}"
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["operationName"] == "record"
    assert detail["metadata"] == {"requestedBy": "ann"}  # null department omitted
    assert detail["fileName"] == "rows.csv"
    assert detail["fileSize"] == len(GOOD_CSV)
    assert detail["createdBy"] == "anonymous"
    assert detail["source"] == "default"
    assert detail["createdAt"].endswith("Z")
    assert "completedAt" not in detail or detail["status"] != "Pending"
    done = await wait_status(client, operation_id)
    assert done == {
        "status": "Completed",
        "processedRows": 2,
        "totalRows": 2,
        "errorCount": 0,
        "completedAt": done["completedAt"],
        "progress": 100,
    }


async def test_created_by_and_operation_name_case(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, GOOD_CSV, operation="RECORD", extra={"createdBy": "bob"})
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["createdBy"] == "bob" and detail["operationName"] == "record"


@pytest.mark.parametrize(
    ("data", "files", "status", "message"),
    [
        ({"operationName": "record"}, None, 400, "file"),
        ({"operationName": "nope"}, ("a.csv", b"x"), 400, "Unknown operation"),
        ({}, ("a.csv", b"x"), 400, "operationName"),
        ({"operationName": "record"}, ("a.csv", b""), 400, "empty"),
        ({"operationName": "record"}, ("a.pdf", b"%PDF"), 415, "Unsupported file type"),
        ({"operationName": "record"}, ("a.xlsx", b"PK"), 422, "not a readable XLSX workbook"),
        ({"operationName": "record"}, ("a.xlsx.gz", b"x"), 415, "XLSX"),
        ({"operationName": "record", "sheet": "S"}, ("a.csv", GOOD_CSV.encode()), 422, "sheet"),
        (
            {"operationName": "record", "notifications": "{not json"},
            ("a.csv", GOOD_CSV.encode()),
            400,
            "notifications",
        ),
        (
            {
                "operationName": "record",
                "notifications": '{"recipients":[{"channel":"webhook","target":"x",'
                '"triggers":["OnNever"]}]}',
            },
            ("a.csv", GOOD_CSV.encode()),
            400,
            "unknown trigger",
        ),
    ],
)
async def test_bad_create_requests_are_refused_before_storing(
    client: httpx.AsyncClient,
    data: dict[str, str],
    files: tuple[str, bytes] | None,
    status: int,
    message: str,
) -> None:
    data = {"metadata": '{"requestedBy": "x"}', **data}
    response = await client.post(
        "/api/bulks", data=data, files={"file": files} if files else {"other": ("x", b"")}
    )
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert await stored_operations(client) == 0


async def test_invalid_metadata_is_422_with_the_validation_result(
    client: httpx.AsyncClient,
) -> None:
    for metadata, expected in [
        ("{}", "requestedBy: Field required"),
        ("[1, 2]", "Metadata must be a JSON object"),
        ("{oops", "Metadata is not valid JSON"),
    ]:
        response = await create(client, GOOD_CSV, metadata=metadata)
        assert response.status_code == 422
        body = response.json()
        assert body["valid"] is False and body["fileErrors"] == []
        assert any(expected in e for e in body["metadataErrors"]), body
        assert "error" in body
    assert await stored_operations(client) == 0


async def test_missing_metadata_part_counts_as_an_empty_object(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/api/bulks",
        data={"operationName": "record"},
        files={"file": ("a.csv", GOOD_CSV.encode(), "text/csv")},
    )
    assert response.status_code == 422
    assert response.json()["metadataErrors"] == ["requestedBy: Field required"]


async def test_oversize_upload_is_413_and_nothing_is_kept(
    make_client: ClientFactory,
) -> None:
    client = await make_client(max_upload_bytes=100)
    big = "name,email\n" + "x,x@example.com\n" * 50
    response = await create(client, big, metadata={"requestedBy": "x"})
    assert response.status_code == 413
    assert "upload limit" in response.json()["error"]
    assert await stored_operations(client) == 0
    files_dir = runtime_of(client).settings.files_url.removeprefix("file://")
    import pathlib

    leftovers = [p for p in pathlib.Path(files_dir).rglob("*") if p.is_file()]
    assert leftovers == []


async def test_path_traversal_file_name_is_only_a_display_name(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await create_ok(client, GOOD_CSV, file_name="../../etc/passwd.csv")
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["fileName"] == "passwd.csv"
    assert "passwd" not in detail["fileId"] and ".." not in detail["fileId"]
    download = await client.get(f"/api/bulks/{operation_id}/file")
    assert download.content == GOOD_CSV.encode()


@pytest.mark.parametrize(
    ("file_name", "content_type", "content"),
    [
        ("rows.CSV", "application/octet-stream", GOOD_CSV),
        ("rows.json", "application/json", '[{"name":"Ada","email":"a@x.io"}]'),
        ("rows.jsonl", "application/octet-stream", '{"name":"Ada","email":"a@x.io"}\n'),
        ("rows.ndjson", "text/plain", '{"name":"Ada","email":"a@x.io"}\n'),
        ("upload", "text/csv", GOOD_CSV),
    ],
)
async def test_file_type_from_extension_else_content_type(
    client: httpx.AsyncClient, file_name: str, content_type: str, content: str
) -> None:
    operation_id = await create_ok(client, content, file_name=file_name, content_type=content_type)
    assert (await wait_status(client, operation_id))["status"] == "Completed"


async def test_validate_reports_valid_and_stores_nothing(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/bulks/validate",
        data={"operationName": "record", "metadata": '{"requestedBy": "x"}'},
        files={"file": ("a.csv", GOOD_CSV.encode(), "text/csv")},
    )
    assert response.status_code == 200
    assert response.json() == {"valid": True, "metadataErrors": [], "fileErrors": []}
    assert await stored_operations(client) == 0


async def test_validate_reports_metadata_and_file_errors(client: httpx.AsyncClient) -> None:
    csv = "name,email,age\nAda,ada@example.com,x\nBob,bob-at-example,3\n,c@x.io,1\n"
    response = await client.post(
        "/api/bulks/validate",
        data={"operationName": "strict-meta", "metadata": '{"requestedBy": "nobody"}'},
        files={"file": ("a.csv", csv.encode(), "text/csv")},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["valid"] is False
    assert body["metadataErrors"] == ["nobody may not import"]
    assert body["fileErrors"][0].startswith("Row 1: age: Input should be a valid integer")
    assert body["fileErrors"][1].startswith("Row 3: name: Field required")


async def test_validate_runs_row_validation_and_checks_header_and_rows(
    client: httpx.AsyncClient,
) -> None:
    async def file_errors(content: str) -> list[str]:
        response = await client.post(
            "/api/bulks/validate",
            data={"operationName": "record", "metadata": '{"requestedBy": "x"}'},
            files={"file": ("a.csv", content.encode(), "text/csv")},
        )
        assert response.status_code == 422, response.text
        return list(response.json()["fileErrors"])

    assert await file_errors("name,email\nBob,bob-at-example\n") == [
        "Row 1: Invalid email 'bob-at-example'"
    ]
    assert await file_errors("name,email\n") == ["File contains no data rows"]
    missing = await file_errors("name,phone\nAda,1\n")
    assert len(missing) == 1 and "email" in missing[0]
    many = "name,email\n" + "x,bad\n" * 60
    assert len(await file_errors(many)) == 20


async def test_validate_needs_a_file(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/bulks/validate", data={"operationName": "record"})
    assert response.status_code == 400
    assert "file" in response.json()["error"]
