"""Background processing seen through HTTP: formats, failures, cancel, concurrency, resume."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx

import bulkops as bo
from tests.integration import operations as ops
from tests.integration.conftest import (
    ClientFactory,
    create_ok,
    runtime_of,
    wait_status,
    wait_until,
)


async def errors_of(client: httpx.AsyncClient, operation_id: str) -> dict[int, dict[str, str]]:
    body = (await client.get(f"/api/bulks/{operation_id}/errors?pageSize=100")).json()
    return {item["rowNumber"]: item for item in body["items"]}


async def test_bom_header_and_case_insensitive_columns(client: httpx.AsyncClient) -> None:
    content = "\ufeffNAME,Email,Age\nAda,ada@example.com,36\n".encode()
    operation_id = await create_ok(client, content)
    status = await wait_status(client, operation_id)
    assert status["status"] == "Completed"
    assert ops.PROCESSED == ["Ada"]


async def test_one_malformed_row_among_good_ones_fails_only_that_row(
    client: httpx.AsyncClient,
) -> None:
    content = (
        "name,email,age\n"
        "Ada,ada@example.com,36\n"
        "Bob,bob@example.com,3,surplus\n"
        '"Cy, the third",cy@example.com,4\n'
        "Dee,dee@example.com,5\n"
    )
    operation_id = await create_ok(client, content)
    status = await wait_status(client, operation_id)
    assert status["status"] == "CompletedWithErrors"
    assert (status["processedRows"], status["errorCount"]) == (4, 1)
    errors = await errors_of(client, operation_id)
    assert list(errors) == [2]
    assert errors[2]["errorType"] == "Validation" and errors[2]["stepIndex"] == -1
    assert ops.PROCESSED == ["Ada", "Cy, the third", "Dee"]


async def test_json_array_and_json_lines(client: httpx.AsyncClient) -> None:
    array = json.dumps(
        [
            {"name": "Ada", "email": "ada@example.com", "age": 36},
            ["not", "an", "object"],
            {"name": "Bob", "email": "bob@example.com", "age": None},
        ]
    )
    first = await create_ok(client, array, file_name="a.json", content_type="application/json")
    lines = '{"name":"Cy","email":"cy@example.com"}\n\n{broken\n{"name":"Dee","email":"d@x.io"}\n'
    second = await create_ok(client, lines, file_name="b.jsonl")
    one, two = await wait_status(client, first), await wait_status(client, second)
    assert (one["status"], one["totalRows"], one["errorCount"]) == ("CompletedWithErrors", 3, 1)
    assert (two["status"], two["totalRows"], two["errorCount"]) == ("CompletedWithErrors", 3, 1)
    assert list(await errors_of(client, first)) == [2]
    assert list(await errors_of(client, second)) == [2]
    assert sorted(ops.PROCESSED) == ["Ada", "Bob", "Cy", "Dee"]


async def test_unreadable_file_fails_the_operation_with_a_clear_message(
    client: httpx.AsyncClient,
) -> None:
    missing_column = await create_ok(client, "name,phone\nAda,1\n")
    not_json = await create_ok(client, "this is not json", file_name="x.json")
    bad_encoding = await create_ok(client, b"name,email\n\xff\xfe,x@y.z\n")
    for operation_id, expected in [
        (missing_column, "email"),
        (not_json, "JSON"),
        (bad_encoding, "UTF-8"),
    ]:
        assert (await wait_status(client, operation_id))["status"] == "Failed"
        detail = (await client.get(f"/api/bulks/{operation_id}")).json()
        assert expected in detail["errorMessage"], detail
        events = (await client.get(f"/api/bulks/{operation_id}/events")).json()
        assert events[-1]["type"] == "Failed" and events[-1]["severity"] == "Error"


async def test_imperative_metadata_validation_fails_at_processing(
    client: httpx.AsyncClient,
) -> None:
    operation_id = await create_ok(
        client,
        "name,email\nAda,a@x.io\n",
        operation="strict-meta",
        metadata={"requestedBy": "nobody"},
    )
    assert (await wait_status(client, operation_id))["status"] == "Failed"
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["errorMessage"] == "Metadata validation failed: nobody may not import"
    assert ops.PROCESSED == []


async def test_plain_def_methods_run_in_worker_threads(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(client, "name,email\nAda,a@x.io\n", operation="strict-meta")
    assert (await wait_status(client, operation_id))["status"] == "Completed"
    assert ops.THREADS and threading.main_thread().name not in ops.THREADS


async def test_total_rows_is_known_before_rows_finish(client: httpx.AsyncClient) -> None:
    operation_id = await create_ok(
        client, "name,email\nwait-a,a@x.io\nb,b@x.io\nc,c@x.io\n", operation="gated"
    )
    running = await wait_status(client, operation_id, {"Running"})
    await wait_until(lambda: _entered(1), what="the first row at the gate")
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    assert running["status"] == "Running"
    assert (status["totalRows"], status["processedRows"], status["progress"]) == (3, 0, 0)
    ops.GATE.open()
    assert (await wait_status(client, operation_id))["status"] == "Completed"


async def _entered(count: int) -> bool:
    return ops.GATE.entered >= count


async def test_cancel_stops_a_running_operation_and_keeps_finished_rows(
    client: httpx.AsyncClient,
) -> None:
    content = "name,email\na,a@x.io\nb,b@x.io\nwait-c,c@x.io\nd,d@x.io\ne,e@x.io\n"
    operation_id = await create_ok(client, content, operation="gated")
    await wait_until(lambda: _entered(1), what="row 3 at the gate")
    response = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "Cancelled"
    runtime = runtime_of(client)
    # The worker notices at its next status check and interrupts the waiting row.
    await wait_until(lambda: _idle(runtime), what="the worker to let go of the cancelled operation")
    ops.GATE.open()
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    assert status["status"] == "Cancelled" and status["processedRows"] == 2
    assert "d" not in ops.PROCESSED and "e" not in ops.PROCESSED
    events = (await client.get(f"/api/bulks/{operation_id}/events")).json()
    assert [e["type"] for e in events][-1] == "Cancelled"
    again = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert again.status_code == 409


async def _idle(runtime: object) -> bool:
    scheduler = getattr(runtime, "scheduler", None)
    return not getattr(scheduler, "active", [])


async def test_api_only_instance_leaves_operations_pending_and_can_cancel_them(
    make_client: ClientFactory,
) -> None:
    client = await make_client(role="api")
    operation_id = await create_ok(client, "name,email\na,a@x.io\n")
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    assert status["status"] == "Pending" and status["totalRows"] == 0
    cancelled = await client.post(f"/api/bulks/{operation_id}/cancel")
    assert cancelled.json()["status"] == "Cancelled"


async def test_rows_run_in_parallel_up_to_max_row_concurrency(
    make_client: ClientFactory,
) -> None:
    client = await make_client(max_row_concurrency=3)
    content = "name,email\n" + "".join(f"wait-{i},w{i}@x.io\n" for i in range(5))
    operation_id = await create_ok(client, content, operation="gated")
    await wait_until(lambda: _entered(3), what="three rows in flight")
    assert ops.GATE.entered == 3  # the fourth waits for a free slot
    ops.GATE.open()
    status = await wait_status(client, operation_id)
    assert (status["status"], status["processedRows"]) == ("Completed", 5)
    assert sorted(ops.PROCESSED) == [f"wait-{i}" for i in range(5)]


async def test_stopped_instance_releases_work_and_the_next_never_reruns_rows(
    tmp_path: Path,
) -> None:
    settings = bo.Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite",
        files_url=f"file://{tmp_path}/files",
        shutdown_timeout=0,
        flush_interval=0.05,
    )
    app = bo.create_app(ops.ALL, settings)
    content = "name,email\na,a@x.io\nb,b@x.io\nwait-c,c@x.io\nd,d@x.io\n"
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as client:
            operation_id = await create_ok(client, content, operation="gated")
            await wait_until(lambda: _entered(1), what="row 3 at the gate")
    # The instance stopped without draining: finished rows kept, operation back to Pending.
    api = bo.create_app(ops.ALL, settings.model_copy(update={"role": "api"}))
    async with api.router.lifespan_context(api):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://t"
        ) as client:
            status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
            assert (status["status"], status["processedRows"]) == ("Pending", 2)
            events = (await client.get(f"/api/bulks/{operation_id}/events")).json()
            assert [e["type"] for e in events] == ["Created", "StatusChanged", "StatusChanged"]
    assert ops.PROCESSED == ["a", "b"]

    ops.GATE.reset()
    ops.GATE.open()
    await bo.Worker(ops.ALL, settings).run_until_idle()
    assert ops.PROCESSED == ["a", "b", "wait-c", "d"]
    api = bo.create_app(ops.ALL, settings.model_copy(update={"role": "api"}))
    async with api.router.lifespan_context(api):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://t"
        ) as client:
            status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
            assert status["status"] == "Completed"
            assert (status["processedRows"], status["totalRows"]) == (4, 4)
            rows = (await client.get(f"/api/bulks/{operation_id}/rows")).json()
            assert [r["rowNumber"] for r in rows["items"]] == [1, 2, 3, 4]
