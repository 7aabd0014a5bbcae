"""Dry runs, fixes in place and runs from an earlier operation, over HTTP."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openpyxl import Workbook, load_workbook

from tests.integration import data_operations as dops
from tests.integration.conftest import (
    ClientFactory,
    create,
    create_ok,
    runtime_of,
    wait_status,
    wait_until,
)

GOOD = "ann,ann@example.com,30"
CSV = "name,email,age\n" + "\n".join(
    [
        GOOD,  # 1
        "bob,bob-at-example.com,41",  # 2: validate_row refuses it
        "cy,cy@example.com,not-a-number",  # 3: the row model refuses it
        "dee,dee@example.com,",  # 4
    ]
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    dops.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {"step_retry_delay": 0}
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(dops.ALL, **options)


async def run(
    client: httpx.AsyncClient, csv: str = CSV, operation: str = "fixable", **extra: str
) -> str:
    operation_id = await create_ok(client, csv, operation=operation, metadata={}, extra=extra)
    await wait_status(client, operation_id)
    return operation_id


async def detail(client: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/bulks/{operation_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def errors(client: httpx.AsyncClient, operation_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        await client.get(f"/api/bulks/{operation_id}/errors?pageSize=100")
    ).json()["items"]
    return items


async def rows(client: httpx.AsyncClient, operation_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        await client.get(f"/api/bulks/{operation_id}/rows?pageSize=100")
    ).json()["items"]
    return items


async def fix(client: httpx.AsyncClient, operation_id: str, row: int, data: Any) -> httpx.Response:
    return await client.patch(f"/api/bulks/{operation_id}/rows/{row}", json={"rowData": data})


async def from_source(client: httpx.AsyncClient, source: str, **fields: str) -> httpx.Response:
    data = {"sourceOperationId": source, **fields}
    return await client.post("/api/bulks", data=data, files={"unused": ("", b"", "text/plain")})


# --- dry run --------------------------------------------------------------------------


async def test_dry_run_validates_every_row_and_runs_nothing(client: httpx.AsyncClient) -> None:
    operation_id = await run(client, dryRun="true")
    record = await detail(client, operation_id)
    assert record["dryRun"] is True
    assert (record["status"], record["totalRows"], record["processedRows"]) == (
        "CompletedWithErrors",
        4,
        4,
    )
    assert (record["successfulRows"], record["errorCount"]) == (2, 2)
    assert dops.RAN == []  # process_row never ran
    assert sorted(dops.VALIDATED) == ["ann", "bob", "dee"]  # cy failed the row model first
    failed = await errors(client, operation_id)
    assert [(e["rowNumber"], e["stepName"], e["stepIndex"]) for e in failed] == [
        (2, "validation", -1),
        (3, "validation", -1),
    ]
    assert failed[0]["rowData"] == {"name": "bob", "email": "bob-at-example.com", "age": "41"}
    # Rows that passed are Completed at the validation step: no step of theirs ran.
    passed = [r for r in await rows(client, operation_id) if r["state"] == "Completed"]
    assert [(r["rowNumber"], r["currentStep"], r["stepIndex"]) for r in passed] == [
        (1, "validation", -1),
        (4, "validation", -1),
    ]
    assert all(step["state"] == "Pending" for r in passed for step in r["steps"])
    # The usual failure events and exports.
    events = (await client.get(f"/api/bulks/{operation_id}/events")).json()
    assert [e["type"] for e in events].count("RowFailed") == 2
    export = await client.get(f"/api/bulks/{operation_id}/export?mode=report&format=csv")
    assert export.status_code == 200 and export.text.count("\n") == 5
    listed = (await client.get("/api/bulks?pageSize=10")).json()["items"]
    assert [item.get("dryRun") for item in listed] == [True]


async def test_a_clean_dry_run_completes_and_a_real_run_shows_no_dry_run(
    client: httpx.AsyncClient,
) -> None:
    dry = await run(client, "name,email\nann,ann@example.com\n", dryRun="TRUE")
    assert (await detail(client, dry))["status"] == "Completed"
    real = await run(client, "name,email\nann,ann@example.com\n", dryRun="false")
    record = await detail(client, real)
    assert record["status"] == "Completed"
    assert "dryRun" not in record and "sourceOperationId" not in record
    assert dops.RAN == [("fixable", "process", "ann ann@example.com None")]


@pytest.mark.parametrize("operation", ["fixable-steps", "fixable-batch", "plain-rows"])
async def test_a_dry_run_of_any_kind_runs_no_step_and_no_batch(
    client: httpx.AsyncClient, operation: str
) -> None:
    csv = "name,email,age\nann,ann@example.com,1\nbo,bo@example.com,x\ncy,cy@example.com,3\n"
    operation_id = await run(client, csv, operation, dryRun="true")
    record = await detail(client, operation_id)
    assert (record["status"], record["successfulRows"], record["errorCount"]) == (
        "CompletedWithErrors",
        2,
        1,
    )
    assert dops.RAN == []
    steps = {"fixable-steps": 2, "fixable-batch": 1, "plain-rows": 1}[operation]
    for row in await rows(client, operation_id):
        assert len(row["steps"]) == row["totalSteps"] == steps
        assert {step["state"] for step in row["steps"]} == {"Pending"}


async def test_a_dry_run_with_metadata_its_operation_refuses_fails(
    client: httpx.AsyncClient,
) -> None:
    response = await create(
        client,
        CSV,
        operation="fixable",
        metadata={"requestedBy": "nobody"},
        extra={"dryRun": "true"},
    )
    assert response.status_code == 201
    status = await wait_status(client, response.json()["operationId"])
    record = await detail(client, response.json()["operationId"])
    assert status["status"] == "Failed" and "nobody may import" in record["errorMessage"]
    assert dops.RAN == [] and dops.VALIDATED == []


@pytest.mark.parametrize("value", ["yes", "1", "", "maybe"])
async def test_dry_run_accepts_only_true_or_false(client: httpx.AsyncClient, value: str) -> None:
    response = await create(client, CSV, operation="fixable", extra={"dryRun": value})
    assert response.status_code == 400
    assert "dryRun must be true or false" in response.json()["error"]
    assert (await client.get("/api/bulks")).json()["totalCount"] == 0


# --- fix in place ---------------------------------------------------------------------


async def test_a_fix_is_validated_at_once_and_shown_as_fixed(client: httpx.AsyncClient) -> None:
    operation_id = await run(client)
    new = {"name": "bob", "email": "bob@example.com", "age": "41"}
    dops.CONTEXTS.clear()
    response = await fix(client, operation_id, 2, new)
    assert dops.CONTEXTS == [(2, -1, None)]  # validate_row saw the row being fixed
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["rowNumber"] == 2 and body["rowData"] == new and body["fixed"] is True
    # Still Failed with its error until a retry runs it again.
    assert (body["state"], body["errorType"]) == ("Failed", "Validation")
    listed = {e["rowNumber"]: e for e in await errors(client, operation_id)}
    assert listed[2]["fixed"] is True and listed[2]["rowData"] == new
    assert "fixed" not in listed[3]
    progress = {r["rowNumber"]: r for r in await rows(client, operation_id)}
    assert progress[2]["fixed"] is True and "fixed" not in progress[1]


async def test_a_fix_with_invalid_data_is_422_with_every_error_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await run(client)
    before = await errors(client, operation_id)
    model = await fix(client, operation_id, 3, {"name": "cy", "email": "cy@x.com", "age": "old"})
    assert model.status_code == 422
    assert model.json()["errors"] == [
        "age: Input should be a valid integer, unable to parse string as an integer (got 'old')"
    ]
    assert "error" in model.json()
    checked = await fix(client, operation_id, 2, {"name": "bob", "email": "still-no-at"})
    assert checked.status_code == 422
    assert checked.json()["errors"] == ["email: 'still-no-at' has no @"]
    unknown = await fix(client, operation_id, 2, {"name": "b", "email": "b@x.com", "colour": "red"})
    assert unknown.status_code == 422 and unknown.json()["errors"] == ["colour: unknown column"]
    missing = await fix(client, operation_id, 2, {"name": "bob", "age": "3"})
    assert missing.status_code == 422
    assert missing.json()["errors"] == ["email: required column missing"]
    assert await errors(client, operation_id) == before


async def test_fix_refusals_name_their_reason(client: httpx.AsyncClient) -> None:
    operation_id = await run(client)
    completed = await fix(client, operation_id, 1, {"name": "a", "email": "a@x.com"})
    assert completed.status_code == 409
    assert completed.json()["reason"] == "Row 1 is Completed; only Failed rows can be fixed"
    unknown_row = await fix(client, operation_id, 99, {"name": "a", "email": "a@x.com"})
    assert unknown_row.status_code == 404 and "Row 99" in unknown_row.json()["error"]
    unknown_op = await fix(client, str(uuid.uuid4()), 1, {"name": "a", "email": "a@x.com"})
    assert unknown_op.status_code == 404
    for body in ({"rowData": [1]}, {"data": {}}, [1], "text"):
        bad = await client.patch(f"/api/bulks/{operation_id}/rows/2", json=body)
        assert bad.status_code == 400 and "rowData" in bad.json()["error"]
    not_json = await client.patch(f"/api/bulks/{operation_id}/rows/2", content=b"{")
    assert not_json.status_code == 400

    untracked = await run(client, "name,email,age\nann,ann@example.com,x\n", "plain-rows")
    refused = await fix(client, untracked, 1, {"name": "a", "email": "a@x.com"})
    assert refused.status_code == 409 and "TrackRowData" in refused.json()["reason"]


async def test_a_running_operation_cannot_be_fixed(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(
        client, "name,email\nboom,b@x.com\nwait,w@x.com\n", operation="fixable-gated"
    )
    await wait_until(lambda: _async_true(dops.GATE is not None), what="the gated row")
    await wait_until(lambda: _has_errors(client, operation_id), what="the failed row to be stored")
    response = await fix(client, operation_id, 1, {"name": "ok", "email": "b@x.com"})
    assert response.status_code == 409
    assert response.json()["reason"] == (
        "Operation is Running; rows can be fixed once it has finished"
    )
    assert dops.GATE is not None
    dops.GATE.set()
    await wait_status(client, operation_id)
    assert (
        await fix(client, operation_id, 1, {"name": "ok", "email": "b@x.com"})
    ).status_code == 200


async def _async_true(value: bool) -> bool:
    return value


async def _has_errors(client: httpx.AsyncClient, operation_id: str) -> bool:
    return bool(await errors(client, operation_id))


async def test_fixed_rows_are_retried_with_their_new_data_validation_failures_included(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await run(client, CSV + "\nboom,boom@example.com,5\n")
    assert (await detail(client, operation_id))["errorCount"] == 3
    eligibility = await client.get(f"/api/bulks/{operation_id}/retry/eligibility")
    assert eligibility.json() == {"isEligible": True}  # row 5 failed processing
    fixed = {"name": "bob", "email": "bob@example.com", "age": "42"}
    assert (await fix(client, operation_id, 2, fixed)).status_code == 200
    dops.RAN.clear()
    retried = await client.post(f"/api/bulks/{operation_id}/retry")
    assert retried.json() == {"rowsSubmitted": 2, "rowsSkipped": 0}  # rows 2 and 5
    await wait_status(client, operation_id)
    record = await detail(client, operation_id)
    assert (record["status"], record["errorCount"], record["successfulRows"]) == (
        "CompletedWithErrors",
        2,
        3,
    )
    assert sorted(dops.RAN) == [
        ("fixable", "process", "bob bob@example.com 42"),
        ("fixable", "process", "boom boom@example.com 5"),
    ]
    progress = {r["rowNumber"]: r for r in await rows(client, operation_id)}
    assert (progress[2]["state"], progress[2]["retryAttempt"], progress[2]["fixed"]) == (
        "Completed",
        1,
        True,
    )
    history = (await client.get(f"/api/bulks/{operation_id}/retry/history?rowNumber=2")).json()
    assert [(h["stepName"], h["errorType"], h["errorMessage"]) for h in history["items"]] == [
        ("validation", "Validation", "email: 'bob-at-example.com' has no @")
    ]


async def test_a_fixed_validation_failure_alone_makes_an_operation_retryable(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await run(client)
    eligibility = await client.get(f"/api/bulks/{operation_id}/retry/eligibility")
    assert eligibility.json()["isEligible"] is False
    await fix(client, operation_id, 3, {"name": "cy", "email": "cy@example.com", "age": "7"})
    assert (await client.get(f"/api/bulks/{operation_id}/retry/eligibility")).json() == {
        "isEligible": True
    }
    chosen = await client.post(f"/api/bulks/{operation_id}/retry/rows", json={"rowNumbers": [2, 3]})
    assert chosen.json() == {
        "rowsSubmitted": 1,
        "rowsSkipped": 1,
        "skippedReasons": ["Row 2 failed validation, which is never retried"],
    }
    await wait_status(client, operation_id)
    assert dops.RAN[-1] == ("fixable", "process", "cy cy@example.com 7")
    assert (await detail(client, operation_id))["errorCount"] == 1


async def test_a_fixed_row_reruns_from_its_failed_step_even_one_without_operation_retry(
    client: httpx.AsyncClient,
) -> None:
    csv = "name,email,age\nann,ann@example.com,-1\nbo,bo-at-x,2\ncy,cy@example.com,-3\n"
    operation_id = await run(client, csv, "fixable-steps")
    assert [(e["rowNumber"], e["stepName"]) for e in await errors(client, operation_id)] == [
        (1, "Send"),
        (2, "validation"),
        (3, "Send"),
    ]
    await fix(client, operation_id, 1, {"name": "ann", "email": "ann@example.com", "age": "1"})
    await fix(client, operation_id, 2, {"name": "bo", "email": "bo@example.com", "age": "2"})
    dops.RAN.clear()
    retried = (await client.post(f"/api/bulks/{operation_id}/retry")).json()
    assert retried["rowsSubmitted"] == 2 and retried["rowsSkipped"] == 1  # row 3: Send
    await wait_status(client, operation_id)
    # Row 1 resumes at Send (Reserve had completed); row 2 runs every step.
    assert sorted(dops.RAN) == sorted(
        [
            ("fixable-steps", "Send", "ann"),
            ("fixable-steps", "Reserve", "bo"),
            ("fixable-steps", "Send", "bo"),
        ]
    )
    assert [e["rowNumber"] for e in await errors(client, operation_id)] == [3]


async def test_a_retry_of_a_dry_run_validates_the_fixed_rows_again_and_nothing_more(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await run(client, dryRun="true")
    await fix(client, operation_id, 2, {"name": "bob", "email": "bob@example.com", "age": "4"})
    dops.VALIDATED.clear()
    retried = await client.post(f"/api/bulks/{operation_id}/retry")
    assert retried.json()["rowsSubmitted"] == 1
    await wait_status(client, operation_id)
    assert dops.VALIDATED == ["bob"] and dops.RAN == []
    record = await detail(client, operation_id)
    assert (record["dryRun"], record["errorCount"], record["successfulRows"]) == (True, 1, 3)
    row = {r["rowNumber"]: r for r in await rows(client, operation_id)}[2]
    assert (row["state"], row["currentStep"]) == ("Completed", "validation")


async def test_a_dry_run_of_an_operation_that_is_not_retryable_may_be_retried(
    client: httpx.AsyncClient,
) -> None:
    real = await run(client, operation="fixable-gated", csv="name,email\nboom,b@x.com\n")
    eligibility = (await client.get(f"/api/bulks/{real}/retry/eligibility")).json()
    assert eligibility == {
        "isEligible": False,
        "reason": "Operation 'fixable-gated' is not retryable",
    }
    dry = await run(client, "name,email\nann,ann@x.com\nbo,\n", "fixable-gated", dryRun="true")
    assert (await fix(client, dry, 2, {"name": "bo", "email": "bo@x.com"})).status_code == 200
    retried = await client.post(f"/api/bulks/{dry}/retry")
    assert retried.json()["rowsSubmitted"] == 1
    await wait_status(client, dry)
    assert (await detail(client, dry))["status"] == "Completed"


# --- run from an earlier operation ----------------------------------------------------


async def test_dry_run_fix_run_from_it_with_the_fixed_data(client: httpx.AsyncClient) -> None:
    dry = await run(client, dryRun="true")
    await fix(client, dry, 2, {"name": "bob", "email": "bob@example.com", "age": "41"})
    await fix(client, dry, 3, {"name": "cy", "email": "cy@example.com", "age": "9"})
    response = await from_source(client, dry, operationName="fixable")
    assert response.status_code == 201, response.text
    real = response.json()["operationId"]
    await wait_status(client, real)
    record = await detail(client, real)
    source = await detail(client, dry)
    assert record["sourceOperationId"] == dry and "dryRun" not in record
    assert (record["status"], record["successfulRows"], record["totalRows"]) == ("Completed", 4, 4)
    assert (record["fileId"], record["fileName"]) == (source["fileId"], source["fileName"])
    assert record["metadata"] == source["metadata"]  # none given: the source's
    assert dops.RAN == [
        ("fixable", "process", "ann ann@example.com 30"),
        ("fixable", "process", "bob bob@example.com 41"),
        ("fixable", "process", "cy cy@example.com 9"),
        ("fixable", "process", "dee dee@example.com None"),
    ]
    downloaded = await client.get(f"/api/bulks/{real}/file")
    assert downloaded.content == CSV.encode()  # the file as uploaded


async def test_a_run_from_a_run_from_a_dry_run_sees_every_fix(client: httpx.AsyncClient) -> None:
    first = await run(client, dryRun="true")
    await fix(client, first, 2, {"name": "bob", "email": "bob@example.com", "age": "41"})
    second = (await from_source(client, first, dryRun="true")).json()["operationId"]
    await wait_status(client, second)
    assert [e["rowNumber"] for e in await errors(client, second)] == [3]
    await fix(client, second, 3, {"name": "cy", "email": "cy@example.com", "age": "9"})
    third = (await from_source(client, second, metadata='{"requestedBy": "me"}')).json()
    await wait_status(client, third["operationId"])
    record = await detail(client, third["operationId"])
    assert (record["status"], record["metadata"]) == ("Completed", {"requestedBy": "me"})
    assert len(dops.RAN) == 4


async def test_runs_from_an_earlier_operation_refuse_bad_input(client: httpx.AsyncClient) -> None:
    source = await run(client, dryRun="true")
    other = await from_source(client, source, operationName="fixable-steps")
    assert other.status_code == 400
    message = other.json()["error"]
    assert "fixable-steps" in message and "'fixable'" in message and source in message
    unknown = str(uuid.uuid4())
    missing = await from_source(client, unknown, operationName="fixable")
    assert missing.status_code == 404 and unknown in missing.json()["error"]
    for text in ("not-an-id", "", " "):
        malformed = await from_source(client, text, operationName="fixable")
        assert malformed.status_code == 400 and "sourceOperationId" in malformed.json()["error"]
    both = await create(client, CSV, operation="fixable", extra={"sourceOperationId": source})
    assert both.status_code == 422 and "not both" in both.json()["error"]
    assert both.json()["fileErrors"] == ["Send either a file or sourceOperationId, not both"]
    neither = await client.post(
        "/api/bulks", data={"operationName": "fixable"}, files={"x": ("", b"", "text/plain")}
    )
    assert neither.status_code == 400
    assert (await client.get("/api/bulks")).json()["totalCount"] == 1


async def test_a_run_from_an_earlier_operation_in_chunks(make_client: ClientFactory) -> None:
    client = await make_client(dops.ALL, chunk_rows=3)
    lines = [f"p{n},p{n}@example.com,{n}" for n in range(1, 11)]
    lines[4] = "p5,p5-broken,5"
    lines[8] = "p9,p9@example.com,nine"
    csv = "name,email,age\n" + "\n".join(lines) + "\n"
    dry = await run(client, csv, dryRun="true")
    assert [e["rowNumber"] for e in await errors(client, dry)] == [5, 9]
    await fix(client, dry, 5, {"name": "p5", "email": "p5@example.com", "age": "5"})
    await fix(client, dry, 9, {"name": "p9", "email": "p9@example.com", "age": "9"})
    real = (await from_source(client, dry)).json()["operationId"]
    await wait_status(client, real)
    record = await detail(client, real)
    assert (record["status"], record["successfulRows"]) == ("Completed", 10)
    assert sorted(r[2] for r in dops.RAN) == sorted(
        f"p{n} p{n}@example.com {n}" for n in range(1, 11)
    )
    chunks = runtime_of(client).stores.chunks
    assert await chunks.get_chunk(uuid.UUID(real), 3) is not None  # it ran in four chunks


async def test_concurrent_fix_and_retry_never_lose_the_fix(client: httpx.AsyncClient) -> None:
    operation_id = await run(client, CSV + "\nboom,boom@example.com,5\n")
    new = {"name": "bob", "email": "bob@example.com", "age": "1"}
    fixed, retried = await asyncio.gather(
        fix(client, operation_id, 2, new), client.post(f"/api/bulks/{operation_id}/retry")
    )
    await wait_status(client, operation_id)
    if fixed.status_code == 200:
        stored = {r["rowNumber"]: r for r in await rows(client, operation_id)}[2]
        assert stored["fixed"] is True
    else:
        assert fixed.status_code == 409
    assert retried.status_code == 200


async def test_data_exports_mark_fixed_rows_and_a_row_of_one_can_be_sent_back(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await run(client)
    plain = await client.get(f"/api/bulks/{operation_id}/export?mode=data&format=csv")
    assert plain.text.splitlines()[0] == "name,email,age,_rowNumber,_state,_errorType,_errorMessage"
    exported = await client.get(
        f"/api/bulks/{operation_id}/export?mode=data&format=jsonl&state=Failed"
    )
    (item,) = [i for i in map(json.loads, exported.text.splitlines()) if i["_rowNumber"] == 2]
    item["email"] = "bob@example.com"
    sent_back = await fix(client, operation_id, 2, item)  # outcome columns are left out
    assert sent_back.status_code == 200, sent_back.text
    assert sent_back.json()["rowData"] == {"name": "bob", "email": "bob@example.com", "age": "41"}

    as_csv = (await client.get(f"/api/bulks/{operation_id}/export?mode=data&format=csv")).text
    lines = as_csv.splitlines()
    assert lines[0].endswith(",_errorMessage,_fixed")
    assert lines[2].startswith("bob,bob@example.com,41,2,Failed,") and lines[2].endswith(",true")
    assert lines[3].endswith(",")  # row 3: not fixed
    as_json = (await client.get(f"/api/bulks/{operation_id}/export?mode=data&format=json")).json()
    assert [item.get("_fixed") for item in as_json] == [None, True, None, None]
    as_xlsx = await client.get(f"/api/bulks/{operation_id}/export?mode=data&format=xlsx")
    header, *cells = sheet_rows(as_xlsx.content)
    assert header[-2:] == ("_errorMessage", "_fixed")
    assert [row[-1] for row in cells] == [None, "true", None, None]


async def test_report_exports_mark_fixed_rows_in_every_format(client: httpx.AsyncClient) -> None:
    """A report has a ``fixed`` column only once some row was fixed (as data mode's
    ``_fixed``), true for the fixed rows; JSON items carry ``fixed: true`` for those."""
    operation_id = await run(client)
    export = f"/api/bulks/{operation_id}/export?mode=report&format="
    before = await client.get(export + "csv")
    assert before.text.splitlines()[0].endswith(",completedAt")
    assert sheet_rows((await client.get(export + "xlsx")).content)[0][-1] == "completedAt"
    assert all("fixed" not in item for item in (await client.get(export + "json")).json())
    fixed = {"name": "bob", "email": "bob@example.com", "age": "41"}
    assert (await fix(client, operation_id, 2, fixed)).status_code == 200

    lines = (await client.get(export + "csv")).text.splitlines()
    assert lines[0].endswith(",completedAt,fixed")
    assert [line.rsplit(",", 1)[1] for line in lines[1:]] == ["", "true", "", ""]
    header, *cells = sheet_rows((await client.get(export + "xlsx")).content)
    assert header[-1] == "fixed" and [row[-1] for row in cells] == [None, "true", None, None]
    as_json = (await client.get(export + "json")).json()
    assert [item.get("fixed") for item in as_json] == [None, True, None, None]
    lines = (await client.get(export + "jsonl&state=Failed")).text.splitlines()
    by_row = {item["rowNumber"]: item.get("fixed") for item in map(json.loads, lines)}
    assert by_row == {2: True, 3: None}


def sheet_rows(content: bytes) -> list[tuple[Any, ...]]:
    """An XLSX export's rows, each as wide as its header (a row's empty cells at the end
    are not written)."""
    book = load_workbook(io.BytesIO(content), read_only=True)
    try:
        header, *rows = [tuple(row) for row in book.active.iter_rows(values_only=True)]
    finally:
        book.close()
    return [header, *(row + (None,) * (len(header) - len(row)) for row in rows)]


async def test_a_tenant_runs_only_from_its_own_tenants_operations(
    make_client: ClientFactory,
) -> None:
    tokens = {
        "acme": {"role": "operate", "name": "alice", "tenant": "acme"},
        "globex": {"role": "operate", "name": "bob", "tenant": "globex"},
    }
    client = await make_client(dops.ALL, auth_tokens=json.dumps(tokens))
    acme = {"Authorization": "Bearer acme"}
    created = await client.post(
        "/api/bulks",
        data={"operationName": "fixable", "dryRun": "true"},
        files={"file": ("rows.csv", CSV.encode(), "text/csv")},
        headers=acme,
    )
    dry = created.json()["operationId"]
    client.headers.update(acme)
    await wait_status(client, dry)
    del client.headers["Authorization"]
    form = {"operationName": "fixable", "sourceOperationId": dry}
    unused = {"unused": ("", b"", "text/plain")}
    stranger = await client.post(
        "/api/bulks", data=form, files=unused, headers={"Authorization": "Bearer globex"}
    )
    assert stranger.status_code == 404 and dry in stranger.json()["error"]
    own = await client.post("/api/bulks", data=form, files=unused, headers=acme)
    assert own.status_code == 201, own.text


async def test_a_run_from_an_xlsx_dry_run_reads_the_same_worksheet(
    client: httpx.AsyncClient,
) -> None:
    book = Workbook()
    book.active.title = "Notes"
    book.active.append(["name", "email"])
    book.active.append(["not", "this sheet"])
    sheet = book.create_sheet("People")
    sheet.append(["name", "email", "age"])
    sheet.append(["ann", "ann@example.com", 30])
    sheet.append(["bob", "bob-at-example.com", 41])
    content = io.BytesIO()
    book.save(content)
    created = await create(
        client,
        content.getvalue(),
        operation="fixable",
        metadata={},
        file_name="people.xlsx",
        content_type="application/octet-stream",
        extra={"dryRun": "true", "sheet": "People"},
    )
    assert created.status_code == 201, created.text
    dry = created.json()["operationId"]
    await wait_status(client, dry)
    (failed,) = await errors(client, dry)
    # Cells read as a CSV cell would be.
    assert failed["rowData"] == {"name": "bob", "email": "bob-at-example.com", "age": "41"}
    fixed = {"name": "bob", "email": "bob@example.com", "age": "41"}
    assert (await fix(client, dry, 2, fixed)).status_code == 200
    with_sheet = await from_source(client, dry, sheet="Notes")
    assert with_sheet.status_code == 422 and "sheet" in with_sheet.json()["error"]
    real = (await from_source(client, dry)).json()["operationId"]
    await wait_status(client, real)
    record = await detail(client, real)
    assert (record["status"], record["successfulRows"]) == ("Completed", 2)
    assert dops.RAN == [
        ("fixable", "process", "ann ann@example.com 30"),
        ("fixable", "process", "bob bob@example.com 41"),
    ]
    # The worksheet is the operation's own column, never among its notification options,
    # and the run from the dry run keeps it.
    operations = runtime_of(client).stores.operations
    for operation_id in (dry, real):
        stored = await operations.get(uuid.UUID(operation_id))
        assert stored is not None and (stored.sheet, stored.notifications) == ("People", None)


async def test_a_fix_with_the_rows_own_data_changes_nothing(client: httpx.AsyncClient) -> None:
    """A data export sent back whole: rows nobody edited are not fixes (``unchanged``),
    ``fixed`` stays as it was and no event is written; an edited row is a fix as before."""
    operation_id = await run(client)
    exported = await client.get(
        f"/api/bulks/{operation_id}/export?mode=data&format=csv&state=Failed"
    )
    items = list(csv.DictReader(io.StringIO(exported.text)))
    assert [item["_rowNumber"] for item in items] == ["2", "3"]
    events_before = (await client.get(f"/api/bulks/{operation_id}/events")).json()
    for item in items:
        same = await fix(client, operation_id, int(item["_rowNumber"]), item)
        assert same.status_code == 200, same.text
        body = same.json()
        assert body["unchanged"] is True and "fixed" not in body
        assert body["state"] == "Failed"
    assert all("fixed" not in e for e in await errors(client, operation_id))
    assert (await client.get(f"/api/bulks/{operation_id}/events")).json() == events_before
    # A real fix, then the same data again: still fixed, and again nothing changes.
    new = {"name": "bob", "email": "bob@example.com", "age": "41"}
    first = (await fix(client, operation_id, 2, new)).json()
    assert first["fixed"] is True and "unchanged" not in first
    again = (await fix(client, operation_id, 2, {**new, "age": 41})).json()
    assert again["fixed"] is True and again["unchanged"] is True
    assert again["rowData"] == new
