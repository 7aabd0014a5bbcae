"""The command-line client against a fake service (an httpx MockTransport): the requests each
command sends, how it prints the answers, and its exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from bulkops.cli.client import common as cli_common
from bulkops.cli.client import listing as cli_listing
from bulkops.cli.main import app
from bulkops.client import Client

runner = CliRunner()
OP = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
NEW = "7b1e2d3c-4a5b-4c6d-8e7f-901a2b3c4d5e"
URL = "http://bulkops.test"
Handler = Callable[[httpx.Request], httpx.Response]


@dataclass
class Service:
    """A fake bulkops service: answers by (method, path), records every request."""

    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    seen: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, path: str, answer: Handler | Any, status: int = 200) -> None:
        """Answer ``method path`` with ``answer`` (a handler, or a JSON body)."""
        if callable(answer):
            self.routes[(method, path)] = answer
        else:
            self.routes[(method, path)] = lambda _: httpx.Response(status, json=answer)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return httpx.Response(404, json={"error": f"Operation {OP} not found"})
        return handler(request)

    def requests(self, method: str, path: str) -> list[httpx.Request]:
        """The requests sent to ``method path``."""
        return [r for r in self.seen if r.method == method and r.url.path == path]


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    fake = Service()

    def client(url: str, token: str | None = None) -> Client:
        return Client(url, token=token, transport=httpx.MockTransport(fake.handle))

    monkeypatch.setattr(cli_common, "Client", client)
    yield fake


def bulkops(*args: str) -> Any:
    return runner.invoke(app, [*args, "--url", URL])


def form(request: httpx.Request) -> dict[str, tuple[str | None, str | None, bytes]]:
    """A multipart request's parts: name -> (file name, content type, content)."""
    head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.read())
    assert message.is_multipart()
    parts = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        parts[str(name)] = (part.get_filename(), part.get("content-type"), payload)
    return parts


def fields(request: httpx.Request) -> dict[str, str]:
    """A multipart request's plain fields, as text."""
    return {k: v[2].decode() for k, v in form(request).items() if v[0] is None}


def detail(**overrides: Any) -> dict[str, Any]:
    body = {
        "id": OP,
        "operationName": "import-users",
        "status": "CompletedWithErrors",
        "createdBy": "alice",
        "createdAt": "2026-11-27T10:00:00Z",
        "totalRows": 3,
        "processedRows": 3,
        "errorCount": 2,
        "metadata": {"requestedBy": "alice"},
    }
    body.update(overrides)
    return body


def error_item(number: int, message: str = "bad email", **overrides: Any) -> dict[str, Any]:
    body = {
        "rowNumber": number,
        "stepIndex": 0,
        "errorType": "Validation",
        "errorMessage": message,
        "state": "Failed",
        "rowData": {"name": f"P{number}"},
    }
    body.update(overrides)
    return body


# --- submit ---------------------------------------------------------------------------------


def test_submit_sends_dry_run_priority_and_sheet(service: Service, tmp_path: Path) -> None:
    service.on("POST", "/api/bulks", {"operationId": NEW}, status=201)
    workbook = tmp_path / "people.xlsx"
    workbook.write_bytes(b"PK\x03\x04 not really a workbook")

    result = bulkops(
        "submit",
        str(workbook),
        "-o",
        "import-users",
        "--metadata",
        '{"requestedBy": "me"}',
        "--dry-run",
        "--priority",
        "-3",
        "--sheet",
        "Sheet 2",
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NEW
    [create] = service.requests("POST", "/api/bulks")
    parts = form(create)
    assert fields(create) == {
        "operationName": "import-users",
        "metadata": '{"requestedBy": "me"}',
        "dryRun": "true",
        "priority": "-3",
        "sheet": "Sheet 2",
    }
    name, media, content = parts["file"]
    assert name == "people.xlsx" and content == workbook.read_bytes()
    assert media == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def test_submit_leaves_out_what_was_not_asked(service: Service, tmp_path: Path) -> None:
    service.on("POST", "/api/bulks", {"operationId": NEW}, status=201)
    rows = tmp_path / "rows.csv.gz"
    rows.write_bytes(b"\x1f\x8b compressed")

    result = bulkops("submit", str(rows), "-o", "import-users")

    assert result.exit_code == 0, result.output
    [create] = service.requests("POST", "/api/bulks")
    assert fields(create) == {"operationName": "import-users", "metadata": "{}"}
    assert form(create)["file"][:2] == ("rows.csv.gz", "application/gzip")


def test_submit_from_an_earlier_operation_sends_no_file(service: Service) -> None:
    service.on("POST", "/api/bulks", {"operationId": NEW}, status=201)

    result = bulkops("submit", "--from", OP, "--priority", "10")

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NEW
    [create] = service.seen
    assert create.headers["content-type"].startswith("multipart/form-data")
    assert "file" not in form(create)
    # The operation name, metadata and column map left out are the source's (server side).
    assert fields(create) == {"sourceOperationId": OP, "priority": "10"}


def test_submit_from_with_metadata_given_sends_it(service: Service) -> None:
    service.on("POST", "/api/bulks", {"operationId": NEW}, status=201)

    result = bulkops(
        "submit", "--from", OP, "-o", "import-users", "--metadata", '{"requestedBy": "bob"}'
    )

    assert result.exit_code == 0, result.output
    [create] = service.seen
    assert fields(create) == {
        "operationName": "import-users",
        "metadata": '{"requestedBy": "bob"}',
        "sourceOperationId": OP,
    }


def test_submit_usage_errors_send_nothing(service: Service, tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("name\nx\n")

    neither = bulkops("submit", "-o", "import-users")
    both = bulkops("submit", str(rows), "--from", OP, "-o", "import-users")
    unnamed = bulkops("submit", str(rows))
    too_high = bulkops("submit", str(rows), "-o", "import-users", "--priority", "11")

    for result in (neither, both, unnamed, too_high):
        assert result.exit_code == 2, result.output
    assert "needs a FILE, or --from ID" in neither.stderr
    assert "not both" in both.stderr
    assert "--operation" in unnamed.stderr
    assert "--priority" in too_high.output
    assert service.seen == []


def test_a_refused_submit_exits_2_with_the_server_message(service: Service, tmp_path: Path) -> None:
    service.on(
        "POST",
        "/api/bulks",
        {"error": "Operation 'import-users' cannot run from 'export-users' operation " + OP},
        status=400,
    )
    result = bulkops("submit", "--from", OP, "-o", "import-users")

    assert result.exit_code == 2
    assert result.stderr.startswith("Error: Operation 'import-users' cannot run")


# --- export ---------------------------------------------------------------------------------


def test_export_state_is_sent_as_the_state_filter(service: Service, tmp_path: Path) -> None:
    body = b"name,email,_rowNumber,_state,_errorType,_errorMessage\nBob,bob,2,Failed,,\n"
    service.on("GET", f"/api/bulks/{OP}/export", lambda _: httpx.Response(200, content=body))
    target = tmp_path / "failed.csv"

    result = bulkops("export", OP, "--state", "Failed", "--mode", "data", "-o", str(target))

    assert result.exit_code == 0, result.output
    assert target.read_bytes() == body
    [request] = service.requests("GET", f"/api/bulks/{OP}/export")
    assert dict(request.url.params) == {"mode": "data", "format": "csv", "state": "Failed"}
    unfiltered = bulkops("export", OP)
    assert unfiltered.exit_code == 0 and unfiltered.stdout_bytes == body
    assert "state" not in service.requests("GET", f"/api/bulks/{OP}/export")[1].url.params


# --- lists ----------------------------------------------------------------------------------


def page(items: list[Any], next_after: int | None = None) -> dict[str, Any]:
    return {
        "items": items,
        "totalCount": len(items),
        "page": 1,
        "pageSize": 20,
        "hasNextPage": False,
        "nextAfter": next_after,
    }


LONG = "a very long operation name that a table on an eighty column terminal would cut short"


def test_a_piped_list_is_tab_separated_with_full_values(service: Service) -> None:
    other = "0a0b0c0d-0000-4000-8000-000000000001"
    service.on(
        "GET",
        "/api/bulks",
        page(
            [
                detail(operationName=LONG, priority=5, dryRun=True, tenant="acme"),
                detail(id=other, status="Running", createdBy="bob"),  # an older server
            ]
        ),
    )

    result = bulkops("list")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == [
        "id",
        "operationName",
        "status",
        "processedRows",
        "totalRows",
        "errorCount",
        "priority",
        "dryRun",
        "createdBy",
        "createdAt",
        "tenant",
    ]
    assert lines[1].split("\t") == [
        OP,
        LONG,
        "CompletedWithErrors",
        "3",
        "3",
        "2",
        "5",
        "true",
        "alice",
        "2026-11-27T10:00:00+00:00",
        "acme",
    ]
    assert lines[2].split("\t")[:3] == [other, "import-users", "Running"]
    assert lines[2].split("\t")[6:8] == ["0", "false"] and lines[2].endswith("\t")
    assert len(lines) == 3
    assert not set("│┃━─┏╭…") & set(result.stdout)
    assert "2 operations in all" in result.stderr


def test_piped_errors_escape_what_would_break_a_line(service: Service) -> None:
    message = "Row 2: email\tnot valid\nsee C:\\docs"
    service.on(
        "GET",
        f"/api/bulks/{OP}/errors",
        page([error_item(2, message, rowId="user-2", fixed=True), error_item(3, "x" * 300)]),
    )

    result = bulkops("errors", OP)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "rowNumber\trowId\tstate\tstepName\terrorType\terrorMessage\tfixed"
    assert lines[1].split("\t") == [
        "2",
        "user-2",
        "Failed",
        "",
        "Validation",
        "Row 2: email\\tnot valid\\nsee C:\\\\docs",
        "true",
    ]
    assert lines[2].split("\t")[5] == "x" * 300 and lines[2].endswith("\tfalse")
    assert len(lines) == 3
    assert "2 failed rows" in result.stderr


def test_piped_rows_and_operations(service: Service) -> None:
    service.on(
        "GET",
        f"/api/bulks/{OP}/rows",
        page(
            [
                {"rowNumber": 1, "state": "Completed", "completedSteps": 2, "totalSteps": 2},
                {
                    "rowNumber": 2,
                    "rowId": "r2",
                    "state": "Failed",
                    "currentStep": "Send welcome",
                    "completedSteps": 1,
                    "totalSteps": 2,
                    "retryAttempt": 1,
                    "fixed": True,
                },
            ]
        ),
    )
    service.on(
        "GET",
        "/api/operations",
        [
            {
                "name": "import-users",
                "description": "Import users\nfrom a CSV file",
                "fileColumns": [
                    {"name": "name", "type": "string", "required": True},
                    {"name": "email", "type": "string", "required": True},
                ],
                "steps": [],
            }
        ],
    )

    rows = bulkops("rows", OP)
    operations = bulkops("operations")

    assert rows.stdout.splitlines() == [
        "rowNumber\trowId\tstate\tcurrentStep\tcompletedSteps\ttotalSteps\tretryAttempt\tfixed",
        "1\t\tCompleted\t\t2\t2\t0\tfalse",
        "2\tr2\tFailed\tSend welcome\t1\t2\t1\ttrue",
    ]
    assert operations.stdout.splitlines() == [
        "name\tdescription\tfileColumns\tsteps",
        "import-users\tImport users\\nfrom a CSV file\tname,email\t",
    ]


def test_on_a_terminal_lists_are_tables(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_listing, "piped", lambda: False)
    service.on("GET", f"/api/bulks/{OP}/errors", page([error_item(2)]))

    result = bulkops("errors", OP)

    assert result.exit_code == 0
    assert "┃" in result.stdout or "│" in result.stdout
    assert "Error type" in result.stdout and "1 failed rows" in result.stdout
    service.on("GET", "/api/bulks", page([detail(tenant="acme")]))
    with_tenant = bulkops("list")
    service.on("GET", "/api/bulks", page([detail()]))
    without = bulkops("list")
    assert "Tenant" in with_tenant.stdout and "acme" in with_tenant.stdout
    assert "Tenant" not in without.stdout and "operations in all" in without.stdout


def test_json_output_is_unchanged_when_piped(service: Service) -> None:
    service.on("GET", "/api/bulks", page([detail(priority=2)]))

    result = bulkops("list", "--json")

    listing = json.loads(result.stdout)
    assert listing["items"][0]["id"] == OP and listing["items"][0]["priority"] == 2


# --- fix ------------------------------------------------------------------------------------


def write_export(tmp_path: Path) -> Path:
    export = tmp_path / "failed.csv"
    export.write_text(
        "name,email,age,_rowNumber,_state,_errorType,_errorMessage\n"
        "Ann,ann@example.com,36,2,Failed,Validation,email: not valid\n"
        'Bob,"bob, at example",41,3,Failed,Validation,email: not valid\n'
        "Cy,cy@example.com,,4,Completed,,\n"
        "Di,di@example.com,29,6,Failed,Processing,service down\n"
    )
    return export


def answer_fix(request: httpx.Request) -> httpx.Response:
    number = int(request.url.path.rsplit("/", 1)[1])
    data = json.loads(request.content)["rowData"]
    if "," in data["email"]:
        return httpx.Response(
            422, json={"error": "Row data is not valid", "errors": ["email: not an email"]}
        )
    return httpx.Response(200, json=error_item(number, rowData=data, fixed=True))


def route_fixes(service: Service, *numbers: int) -> None:
    """The operation has ended with these rows failed, and takes fixes for them."""
    service.on("GET", f"/api/bulks/{OP}/errors", page([error_item(n) for n in numbers]))
    for number in numbers:
        service.on("PATCH", f"/api/bulks/{OP}/rows/{number}", answer_fix)


def test_fix_sends_each_row_then_retries_the_fixed_ones(service: Service, tmp_path: Path) -> None:
    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 2, 3, 6)
    service.on(
        "POST", f"/api/bulks/{OP}/retry/rows", {"rowsSubmitted": 2, "rowsSkipped": 0}, status=202
    )

    result = bulkops("fix", OP, str(write_export(tmp_path)))

    assert result.exit_code == 2  # row 3 was refused
    patches = [r for r in service.seen if r.method == "PATCH"]
    assert [r.url.path.rsplit("/", 1)[1] for r in patches] == ["2", "3", "6"]
    assert json.loads(patches[0].content) == {
        "rowData": {"name": "Ann", "email": "ann@example.com", "age": "36"}
    }
    [retry] = service.requests("POST", f"/api/bulks/{OP}/retry/rows")
    assert json.loads(retry.content) == {"rowNumbers": [2, 6]}
    assert "row 3 refused: email: not an email" in result.stderr
    assert "2 rows fixed, 1 refused, 1 skipped (not failed)" in result.stdout
    assert "Retry: 2 rows submitted, 0 skipped" in result.stdout


def test_fix_without_retry_and_from_json_lines(service: Service, tmp_path: Path) -> None:
    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 5)
    export = tmp_path / "failed.jsonl"
    row = {"name": "Eve", "email": "eve@example.com", "age": 7, "tags": ["a"]}
    export.write_text(json.dumps({**row, "_rowNumber": 5, "_state": "Failed"}) + "\n\n")

    result = bulkops("fix", OP, str(export), "--no-retry", "--json")

    assert result.exit_code == 0, result.output
    [patch] = [r for r in service.seen if r.method == "PATCH"]
    assert json.loads(patch.content) == {"rowData": row}  # JSON values keep their types
    assert service.requests("POST", f"/api/bulks/{OP}/retry/rows") == []
    report = json.loads(result.stdout)
    assert report["fixed"] == [5] and report["refused"] == [] and report["retry"] is None


def test_fix_from_a_json_export_hints_the_retry(service: Service, tmp_path: Path) -> None:
    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 1, 2)
    export = tmp_path / "failed.json"
    export.write_text(
        json.dumps(
            [
                {"name": "A", "email": "a@example.com", "_rowNumber": 1},
                {"name": "B", "email": "b@example.com", "_rowNumber": 2},
            ]
        )
    )

    result = bulkops("fix", OP, str(export), "--no-retry")

    assert result.exit_code == 0, result.output
    assert "2 rows fixed, 0 refused" in result.stdout
    assert f"bulkops retry {OP} --rows 1,2" in result.stdout


def test_fix_refusals_of_the_whole_operation(service: Service, tmp_path: Path) -> None:
    export = write_export(tmp_path)

    unknown = bulkops("fix", OP, str(export))  # the fake knows no operation yet

    assert unknown.exit_code == 2 and "not found" in unknown.stderr
    assert [r.method for r in service.seen] == ["GET"]

    service.on("GET", f"/api/bulks/{OP}", detail(status="Running"))
    running = {"error": "Operation is Running: rows are fixed once it has ended"}
    for number in (2, 3, 6):
        service.on("PATCH", f"/api/bulks/{OP}/rows/{number}", running, status=409)
    refused = bulkops("fix", OP, str(export))

    assert refused.exit_code == 2
    assert refused.stderr.count("rows are fixed once it has ended") == 3
    assert service.requests("POST", f"/api/bulks/{OP}/retry/rows") == []


def test_fix_a_refused_retry_and_a_failing_server(service: Service, tmp_path: Path) -> None:
    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 2, 6)
    service.on(
        "POST",
        f"/api/bulks/{OP}/retry/rows",
        {"error": "Retry refused", "reason": "the operation is not retryable"},
        status=409,
    )
    export = tmp_path / "good.csv"
    export.write_text("name,email,_rowNumber\nAnn,ann@example.com,2\nDi,di@example.com,6\n")

    refused = bulkops("fix", OP, str(export))

    assert refused.exit_code == 2
    assert "2 rows fixed, 0 refused" in refused.stdout
    assert "retry refused: Retry refused (the operation is not retryable)" in refused.stderr

    service.on("PATCH", f"/api/bulks/{OP}/rows/2", {"error": "boom"}, status=500)
    broken = bulkops("fix", OP, str(export))
    assert broken.exit_code == 1 and "boom" in broken.stderr


def test_fix_refuses_files_that_are_not_data_exports(service: Service, tmp_path: Path) -> None:
    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 2)
    report = tmp_path / "report.csv"
    report.write_text("rowNumber,state\n2,Failed\n")
    other = tmp_path / "rows.txt"
    other.write_text("x")
    odd = tmp_path / "odd.csv"
    odd.write_text("name,_rowNumber\nA,two\n")

    no_numbers = bulkops("fix", OP, str(report))
    wrong_kind = bulkops("fix", OP, str(other))
    bad_number = bulkops("fix", OP, str(odd), "--no-retry")

    assert no_numbers.exit_code == 2 and "no _rowNumber column" in no_numbers.stderr
    assert wrong_kind.exit_code == 2 and ".csv, .json, .jsonl or .xlsx" in wrong_kind.stderr
    assert bad_number.exit_code == 2 and "'two' is not a row number" in bad_number.stderr
    assert [r for r in service.seen if r.method == "PATCH"] == []


def test_fix_again_leaves_rows_that_no_longer_fail(service: Service, tmp_path: Path) -> None:
    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 3)  # rows 2 and 6 were fixed and retried by an earlier run
    service.on(
        "POST", f"/api/bulks/{OP}/retry/rows", {"rowsSubmitted": 1, "rowsSkipped": 0}, status=202
    )
    export = tmp_path / "failed.csv"
    export.write_text(
        "name,email,_rowNumber,_state\n"
        "Ann,ann@example.com,2,Failed\nBob,bob@example.com,3,Failed\nDi,di@example.com,6,Failed\n"
    )

    result = bulkops("fix", OP, str(export))

    assert result.exit_code == 0, result.output
    assert [r.url.path for r in service.seen if r.method == "PATCH"] == [f"/api/bulks/{OP}/rows/3"]
    assert "1 rows fixed, 0 refused, 2 skipped (not failed)" in result.stdout


def test_fix_from_a_workbook_sends_cells_as_csv_text(service: Service, tmp_path: Path) -> None:
    import openpyxl

    service.on("GET", f"/api/bulks/{OP}", detail())
    route_fixes(service, 2, 3)
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["name", "email", "age", "joined", "_rowNumber", "_state"])
    sheet.append(["Ann", "ann@example.com", 36.0, datetime(2026, 1, 2), 2, "Failed"])
    sheet.append([None, None, None, None, None, None])  # a blank row is no row
    sheet.append(["Bob", "bob@example.com", None, datetime(2026, 1, 2, 9, 30), 3, "Failed"])
    export = tmp_path / "failed.xlsx"
    book.save(export)
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"not a zip")

    result = bulkops("fix", OP, str(export), "--no-retry")
    unreadable = bulkops("fix", OP, str(broken))

    assert result.exit_code == 0, result.output
    bodies = [json.loads(r.content)["rowData"] for r in service.seen if r.method == "PATCH"]
    assert bodies == [
        {"name": "Ann", "email": "ann@example.com", "age": "36", "joined": "2026-01-02"},
        {"name": "Bob", "email": "bob@example.com", "age": "", "joined": "2026-01-02T09:30:00"},
    ]
    assert unreadable.exit_code == 2 and "not a readable workbook" in unreadable.stderr


def test_fix_lists_unchanged_rows_apart_and_does_not_retry_them(
    service: Service, tmp_path: Path
) -> None:
    """A whole failed-rows export sent back: rows nobody edited come back ``unchanged``
    (the server recorded no fix); they are reported apart and left out of the retry."""
    service.on("GET", f"/api/bulks/{OP}", detail())
    service.on("GET", f"/api/bulks/{OP}/errors", page([error_item(n) for n in (2, 6)]))
    service.on("PATCH", f"/api/bulks/{OP}/rows/2", answer_fix)
    service.on(
        "PATCH",
        f"/api/bulks/{OP}/rows/6",
        error_item(6, rowData={"name": "Di"}, unchanged=True),
    )
    service.on(
        "POST", f"/api/bulks/{OP}/retry/rows", {"rowsSubmitted": 1, "rowsSkipped": 0}, status=202
    )
    export = tmp_path / "failed.csv"
    export.write_text("name,email,_rowNumber\nAnn,ann@example.com,2\nDi,di@example.com,6\n")

    result = bulkops("fix", OP, str(export))
    as_json = bulkops("fix", OP, str(export), "--json")

    assert result.exit_code == 0, result.output
    assert "1 rows fixed, 0 refused, 1 unchanged (same data, not retried)" in result.stdout
    retries = service.requests("POST", f"/api/bulks/{OP}/retry/rows")
    assert [json.loads(r.content) for r in retries] == [{"rowNumbers": [2]}] * 2
    report = json.loads(as_json.stdout)
    assert (report["fixed"], report["unchanged"]) == ([2], [6])


def test_template_as_a_workbook_needs_a_file(service: Service, tmp_path: Path) -> None:
    workbook = b"PK\x03\x04 a workbook"
    service.on(
        "GET",
        "/api/operations/import-users/template",
        lambda request: httpx.Response(200, content=workbook),
    )
    target = tmp_path / "users.xlsx"

    saved = bulkops("template", "import-users", "--format", "xlsx", "-o", str(target))
    to_terminal = bulkops("template", "import-users", "--format", "xlsx")
    unknown = bulkops("template", "import-users", "--format", "pdf")

    assert saved.exit_code == 0, saved.output
    assert target.read_bytes() == workbook
    [request] = service.requests("GET", "/api/operations/import-users/template")
    assert request.url.params["format"] == "xlsx"
    assert to_terminal.exit_code == 2 and "--output" in to_terminal.stderr
    assert unknown.exit_code != 0  # not one of csv, xlsx
