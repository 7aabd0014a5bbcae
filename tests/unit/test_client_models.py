"""The Python client's own side: it names statuses with the server's wire enums, its models
take the newer fields and tolerate their absence, and submit needs a file or a source."""

from __future__ import annotations

import io
import json

import httpx
import pytest

from bulkops.client import ApiError, Client, ErrorType, Operation, OperationStatus, RowError
from bulkops.client import RowState as ClientRowState
from bulkops.storage import states

OP = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
OPERATION = {
    "id": OP,
    "operationName": "import-users",
    "status": "Completed",
    "createdBy": "alice",
    "createdAt": "2026-11-27T10:00:00Z",
}


def test_the_client_names_statuses_with_the_servers_own_enums() -> None:
    # One wire vocabulary (``bulkops.wire``): a status the client reads is the server's member.
    assert OperationStatus is states.OperationStatus
    assert ClientRowState is states.RowState and ErrorType is states.ErrorType
    assert OperationStatus.COMPLETED_WITH_ERRORS.is_terminal
    assert not OperationStatus.RETRYING.is_terminal


def test_new_fields_are_read_and_default_when_absent() -> None:
    old = Operation.model_validate(OPERATION)
    new = Operation.model_validate(
        {**OPERATION, "priority": -4, "tenant": "acme", "dryRun": True, "sourceOperationId": OP}
    )

    assert (old.priority, old.tenant, old.dry_run, old.source_operation_id) == (
        0,
        None,
        False,
        None,
    )
    assert (new.priority, new.tenant, new.dry_run, str(new.source_operation_id)) == (
        -4,
        "acme",
        True,
        OP,
    )
    row = {"rowNumber": 2, "stepIndex": 0, "state": "Failed"}
    assert RowError.model_validate(row).fixed is False
    assert RowError.model_validate({**row, "fixed": True}).fixed is True


def answer(request: httpx.Request) -> httpx.Response:
    if request.method == "PATCH" and request.url.path.endswith("/rows/2"):
        data = json.loads(request.content)["rowData"]
        return httpx.Response(
            200,
            json={
                "rowNumber": 2,
                "stepIndex": 0,
                "state": "Failed",
                "rowData": data,
                "fixed": True,
            },
        )
    if request.method == "PATCH":
        return httpx.Response(
            422, json={"error": "Row data is not valid", "errors": ["age: not a number"]}
        )
    return httpx.Response(201, json={"operationId": OP})


def test_fix_bulk_row_and_its_refusal() -> None:
    with Client("http://bulkops.test", transport=httpx.MockTransport(answer)) as client:
        fixed = client.fix_bulk_row(OP, 2, {"name": "Ann", "age": "36"})
        with pytest.raises(ApiError) as refused:
            client.fix_bulk_row(OP, 3, {"name": "Bob", "age": "old"})

    assert fixed.fixed and fixed.row_data == {"name": "Ann", "age": "36"}
    assert refused.value.status_code == 422 and refused.value.refused
    assert refused.value.errors == ["age: not a number"]
    assert refused.value.message == "Row data is not valid"


def test_submit_needs_a_file_or_a_source() -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    with Client("http://bulkops.test", transport=httpx.MockTransport(record)) as client:
        with pytest.raises(ValueError, match="needs a file, or source_operation_id"):
            client.submit("import-users")
        with pytest.raises(ValueError, match="not both"):
            client.submit("import-users", io.BytesIO(b"name\nx\n"), source_operation_id=OP)
        with pytest.raises(ValueError, match="operation name"):
            client.submit(None, io.BytesIO(b"name\nx\n"))
        created = client.submit(None, source_operation_id=OP)

    assert str(created) == OP
    [create] = seen
    assert create.headers["content-type"].startswith("multipart/form-data")
    body = create.read()
    assert b'name="sourceOperationId"\r\n\r\n' + OP.encode() in body
    assert b'name="file"' not in body
    assert b'name="operationName"' not in body and b'name="metadata"' not in body
