"""Scale-out on PostgreSQL: one API process and two workers share one database."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Process, serve, wait_terminal

pytestmark = pytest.mark.postgres


def test_two_workers_process_every_operation_exactly_once(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    database = {"database_url": empty_postgres_url}
    _, url = serve(spawn, "--role", "api", **database)
    spawn("worker", pending_poll_interval="0.1", **database)
    spawn("worker", pending_poll_interval="0.1", **database)
    log = tmp_path / "processed.log"
    metadata = json.dumps({"gate": str(tmp_path / "gate"), "log": str(log)})
    (tmp_path / "gate").touch()
    ids = []
    for batch in range(6):
        rows = "".join(f"r{batch}-{n}\n" for n in range(20))
        response = httpx.post(
            f"{url}/api/bulks",
            data={"operationName": "file-gated", "metadata": metadata},
            files={"file": (f"b{batch}.csv", ("name\n" + rows).encode(), "text/csv")},
        )
        assert response.status_code == 201, response.text
        ids.append(response.json()["operationId"])
    for operation_id in ids:
        final = wait_terminal(url, operation_id)
        assert (final["status"], final["processedRows"]) == ("Completed", 20)
    processed = log.read_text().split()
    assert len(processed) == 120 and len(set(processed)) == 120  # none twice, none lost
