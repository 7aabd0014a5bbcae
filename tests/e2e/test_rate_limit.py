"""A rate limit holds across worker processes: it lives in the shared database."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Process, serve, wait_terminal

ROWS = 30


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_two_workers_together_keep_one_rate_limit(
    database: str, spawn: Callable[..., Process], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings: dict[str, Any] = {"max_row_concurrency": 4}
    if database == "postgres":
        settings["database_url"] = request.getfixturevalue("empty_postgres_url")
    _, url = serve(spawn, "--role", "api", **settings)
    for _ in range(2):
        spawn("worker", pending_poll_interval="0.1", **settings)
    log = tmp_path / "starts.log"
    ids = []
    for batch in range(2):  # two operations, so both workers run at once
        rows = "".join(f"b{batch}-{n}\n" for n in range(ROWS // 2))
        response = httpx.post(
            f"{url}/api/bulks",
            data={"operationName": "e2e-limited", "metadata": json.dumps({"log": str(log)})},
            files={"file": (f"{batch}.csv", ("name\n" + rows).encode(), "text/csv")},
        )
        assert response.status_code == 201, response.text
        ids.append(response.json()["operationId"])
    for operation_id in ids:
        assert wait_terminal(url, operation_id, timeout=120)["status"] == "Completed"

    starts = sorted(float(line.split()[0]) for line in log.read_text().splitlines())
    assert len(starts) == ROWS
    # No one-second window holds more than five starts (the calls are logged a moment after
    # their permit; a tenth of the window allows for that delay on a loaded machine).
    for index in range(len(starts) - 5):
        assert starts[index + 5] - starts[index] >= 0.9, starts[index : index + 6]
