"""``bo.current_row()`` in every place user code runs for a row: sync and async methods,
concurrent rows, per-step retries, operation retries, and rows run by a row helper."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

import bulkops as bo
from tests.integration.conftest import create_ok, wait_status

OPERATIONS = str(Path(__file__).with_name("context_operations.py"))


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await make(**settings)``: a combined instance serving ``context_operations.py``
    (loaded by path, as a row helper loads it)."""
    async with AsyncExitStack() as stack:
        count = 0

        async def start(**overrides: Any) -> httpx.AsyncClient:
            nonlocal count
            count += 1
            values: dict[str, Any] = {
                "database_url": f"sqlite:///{tmp_path}/db{count}.sqlite",
                "files_url": f"file://{tmp_path}/files{count}",
                "operations": [OPERATIONS],
                "flush_interval": 0.05,
                "step_retry_delay": 0.001,
                "row_helpers": 0,
            }
            values.update(overrides)
            app = bo.create_app(None, bo.Settings(**values))
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bulkops.test"
            )
            await stack.enter_async_context(client)
            client.runtime = app.state.runtime  # type: ignore[attr-defined]
            helpers = client.runtime.row_helpers  # type: ignore[attr-defined]
            if helpers is not None:
                await helpers.ready()
            return client

        yield start


def entries(log: Path, where: str | None = None) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [entry for entry in lines if where is None or entry["where"] == where]


def csv(rows: int, **marks: dict[int, Any]) -> str:
    """Rows 1..rows with ``n`` = the row number, ``key`` = "k<n>", and extra columns."""
    columns = ["n", "key", *marks]
    lines = [",".join(columns)]
    for n in range(1, rows + 1):
        extra = [str(marks[column].get(n, "")) for column in marks]
        lines.append(",".join([str(n), f"k{n}", *extra]))
    return "\n".join(lines) + "\n"


def expected(operation_id: str, n: int, step_index: int) -> str:
    return f"{operation_id}:{n}:{step_index}"


@pytest.mark.parametrize("operation", ["context-rows", "context-sync-rows"])
@pytest.mark.parametrize("concurrency", [1, 4])
async def test_validate_row_and_process_row_see_their_own_row(
    make: Callable[..., Any], tmp_path: Path, operation: str, concurrency: int
) -> None:
    client = await make(max_row_concurrency=concurrency)
    log = tmp_path / "log"
    operation_id = await create_ok(client, csv(40), operation=operation, metadata={"log": str(log)})
    assert (await wait_status(client, operation_id))["status"] == "Completed"

    validated, processed = entries(log, "validate"), entries(log, "process")
    assert sorted(e["row_number"] for e in validated) == list(range(1, 41))
    assert sorted(e["row_number"] for e in processed) == list(range(1, 41))
    for entry in validated:
        n = entry["row_number"]
        assert entry["operation_id"] == operation_id
        assert entry["operation_name"] == operation
        assert entry["row_id"] == f"k{n}"
        assert (entry["step_name"], entry["step_index"]) == (None, -1)
        assert (entry["attempt"], entry["retry_attempt"]) == (1, 0)
        assert entry["created_by"] == "anonymous"
        assert entry["idempotency_key"] == expected(operation_id, n, -1)
    for entry in processed:
        n = entry["row_number"]
        assert entry["row_id"] == f"k{n}"
        assert (entry["step_name"], entry["step_index"]) == ("process", 0)
        assert (entry["attempt"], entry["retry_attempt"]) == (1, 0)
        assert entry["idempotency_key"] == expected(operation_id, n, 0)
    with pytest.raises(LookupError):
        bo.current_row()  # nothing leaks out of the rows


async def test_per_step_retries_count_attempts_under_one_key(
    make: Callable[..., Any], tmp_path: Path
) -> None:
    client = await make()
    log = tmp_path / "log"
    operation_id = await create_ok(
        client,
        csv(3, flaky={1: 2, 3: 1}),
        operation="context-pipeline",
        metadata={"log": str(log)},
    )
    assert (await wait_status(client, operation_id))["status"] == "Completed"

    charged = entries(log, "Charge")
    attempts = {n: [e["attempt"] for e in charged if e["row_number"] == n] for n in (1, 2, 3)}
    assert attempts == {1: [1, 2, 3], 2: [1], 3: [1, 2]}
    for entry in charged:
        assert (entry["step_name"], entry["step_index"]) == ("Charge", 0)
        assert entry["idempotency_key"] == expected(operation_id, entry["row_number"], 0)
    for where, index in (("Notify", 1), ("Deliver", 2), ("Deliver check", 2)):
        seen = entries(log, where)
        assert sorted(e["row_number"] for e in seen) == [1, 2, 3], where
        for entry in seen:
            assert entry["step_index"] == index
            assert entry["step_name"] == where.removesuffix(" check")
            assert entry["attempt"] == 1
            assert entry["idempotency_key"] == expected(operation_id, entry["row_number"], index)


@pytest.mark.parametrize(
    ("operation", "where", "step_index"),
    [("context-rows", "process", 0), ("context-pipeline", "Notify", 1)],
)
async def test_an_operation_retry_keeps_the_key_and_counts_its_round(
    make: Callable[..., Any], tmp_path: Path, operation: str, where: str, step_index: int
) -> None:
    client = await make()
    log, block = tmp_path / "log", tmp_path / "block"
    block.touch()
    operation_id = await create_ok(
        client,
        csv(3, mark={2: "block"}),
        operation=operation,
        metadata={"log": str(log), "block": str(block)},
    )
    assert (await wait_status(client, operation_id))["status"] == "CompletedWithErrors"
    block.unlink()
    retried = await client.post(f"/api/bulks/{operation_id}/retry")
    assert retried.status_code in (200, 202), retried.text
    assert (await wait_status(client, operation_id))["status"] == "Completed"

    runs = [e for e in entries(log, where) if e["row_number"] == 2]
    assert [e["retry_attempt"] for e in runs] == [0, 1]
    assert {e["idempotency_key"] for e in runs} == {expected(operation_id, 2, step_index)}
    assert [e["attempt"] for e in runs] == [1, 1]
    others = [e for e in entries(log, where) if e["row_number"] != 2]
    assert sorted(e["retry_attempt"] for e in others) == [0, 0]  # not retried


async def test_process_batch_has_no_current_row(make: Callable[..., Any], tmp_path: Path) -> None:
    client = await make()
    log = tmp_path / "log"
    operation_id = await create_ok(
        client, csv(7), operation="context-batch", metadata={"log": str(log)}
    )
    assert (await wait_status(client, operation_id))["status"] == "Completed"

    batches = entries(log, "batch")
    assert sorted(n for e in batches for n in e["rows"]) == list(range(1, 8))
    assert all("process_batch" in e["error"] for e in batches)
    validated = entries(log, "validate")  # validate_row of a batch operation sees its row
    assert sorted(e["row_number"] for e in validated) == list(range(1, 8))
    assert all(
        e["idempotency_key"] == expected(operation_id, e["row_number"], -1) for e in validated
    )


@pytest.mark.parametrize("operation", ["context-rows", "context-sync-rows"])
async def test_the_validate_endpoint_tells_validate_row_its_row_under_no_operation(
    make: Callable[..., Any], tmp_path: Path, operation: str
) -> None:
    """``POST /api/bulks/validate`` runs ``validate_row`` before any operation exists:
    ``current_row()`` tells the row checked under the nil operation id, with the caller
    as ``created_by``, as validation's step of a first run."""
    client = await make()
    log = tmp_path / "log"
    form = {"operationName": operation, "metadata": json.dumps({"log": str(log)})}
    response = await client.post(
        "/api/bulks/validate",
        data={**form, "createdBy": "carol"},
        files={"file": ("rows.csv", csv(3).encode(), "text/csv")},
    )
    assert response.status_code == 200, response.text
    assert response.json()["valid"] is True

    validated = entries(log, "validate")
    assert [e["row_number"] for e in validated] == [1, 2, 3]
    nil = "00000000-0000-0000-0000-000000000000"
    for entry in validated:
        n = entry["row_number"]
        assert "error" not in entry
        assert (entry["operation_id"], entry["operation_name"]) == (nil, operation)
        assert (entry["row_id"], entry["created_by"]) == (f"k{n}", "carol")
        assert (entry["step_name"], entry["step_index"]) == (None, -1)
        assert (entry["attempt"], entry["retry_attempt"]) == (1, 0)
        assert entry["idempotency_key"] == expected(nil, n, -1)
    with pytest.raises(LookupError):
        bo.current_row()  # nothing leaks out of the check


@pytest.mark.parametrize("operation", ["context-plain", "context-plain-validated"])
async def test_rows_run_by_a_row_helper_see_their_row(
    make: Callable[..., Any], tmp_path: Path, operation: str
) -> None:
    client = await make(row_helpers=1, chunk_rows=50)
    log = tmp_path / "log"
    rows = "n\n" + "".join(f"{n}\n" for n in range(1, 301))
    operation_id = await create_ok(client, rows, operation=operation, metadata={"log": str(log)})
    assert (await wait_status(client, operation_id))["status"] == "Completed"

    processed = entries(log, "process")
    assert Counter(e["row_number"] for e in processed) == Counter(range(1, 301))
    assert any(e["pid"] != os.getpid() for e in processed), "no row ran in the helper"
    for entry in processed:
        n = entry["row_number"]
        assert (entry["operation_id"], entry["operation_name"]) == (operation_id, operation)
        assert (entry["row_id"], entry["created_by"]) == (None, "anonymous")
        assert (entry["step_name"], entry["step_index"], entry["attempt"]) == ("process", 0, 1)
        assert entry["idempotency_key"] == expected(operation_id, n, 0)
    if operation == "context-plain-validated":
        validated = entries(log, "validate")
        assert Counter(e["row_number"] for e in validated) == Counter(range(1, 301))
        assert all(e["step_index"] == -1 and e["step_name"] is None for e in validated)
