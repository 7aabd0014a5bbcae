"""Fair sharing in a real ``serve`` process: nobody's operation waits for another's to end,
tenants share the row slots, a higher priority goes first without starving a lower one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import TERMINAL, Process, serve, status_of, wait_for, wait_terminal


def create(
    url: str,
    log: Path,
    rows: int,
    delay_ms: int,
    created_by: str = "ann",
    priority: int | None = None,
) -> str:
    content = "name\n" + "".join(f"r{n}\n" for n in range(1, rows + 1))
    data = {
        "operationName": "slow-log",
        "metadata": json.dumps({"log": str(log), "delayMs": delay_ms}),
        "createdBy": created_by,
    }
    if priority is not None:
        data["priority"] = str(priority)
    response = httpx.post(
        f"{url}/api/bulks", data=data, files={"file": ("rows.csv", content.encode(), "text/csv")}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


def processed(url: str, operation_id: str) -> int:
    return int(status_of(url, operation_id).get("processedRows", 0))


def statuses(url: str, ids: list[str]) -> list[str]:
    return [str(status_of(url, operation_id)["status"]) for operation_id in ids]


def cancel_all(url: str, ids: list[str]) -> None:
    for operation_id in ids:
        httpx.post(f"{url}/api/bulks/{operation_id}/cancel")


def test_a_small_operation_completes_while_large_ones_run(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn)  # default settings: 4 workers, one row at a time per operation
    log = tmp_path / "rows.log"
    large = [create(url, log, rows=2000, delay_ms=10) for _ in range(8)]
    wait_for(lambda: all(s == "Running" for s in statuses(url, large)), what="the backlog")

    small = create(url, log, rows=10, delay_ms=10)
    final = wait_terminal(url, small, timeout=60)

    assert (final["status"], final["processedRows"]) == ("Completed", 10)
    running = statuses(url, large)
    assert not set(running) & TERMINAL, running  # it did not wait for any of them
    cancel_all(url, large)


def test_two_tenants_both_progress_whatever_their_operation_counts(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    _, url = serve(spawn, worker_count="2")
    log = tmp_path / "rows.log"
    alice = [create(url, log, rows=3000, delay_ms=10, created_by="alice") for _ in range(6)]
    wait_for(lambda: sum(processed(url, i) for i in alice) > 0, what="alice's rows")
    bob = create(url, log, rows=3000, delay_ms=10, created_by="bob")
    wait_for(lambda: processed(url, bob) > 0, timeout=60, what="bob's first rows")
    start_alice, start_bob = sum(processed(url, i) for i in alice), processed(url, bob)

    # 400 of bob's rows: many write batches, so one batch more or less moves the share little.
    wait_for(lambda: processed(url, bob) >= start_bob + 400, timeout=90, what="bob's rows")

    alice_since = sum(processed(url, i) for i in alice) - start_alice
    bob_rows = processed(url, bob) - start_bob
    assert alice_since > 0  # both progress
    # Equal shares of two slots: bob's one operation runs about as many rows as alice's
    # six together (rows are written in batches, hence the slack).
    assert bob_rows >= 0.35 * (alice_since + bob_rows), (bob_rows, alice_since)
    cancel_all(url, [*alice, bob])


def test_a_higher_priority_goes_first_and_a_lower_one_still_progresses(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    # One process with one operation's worth of room: with more room (worker processes)
    # the lower priority takes what the higher one cannot use, as it should.
    _, url = serve(spawn, worker_count="1", worker_processes=0)
    log = tmp_path / "rows.log"
    low = create(url, log, rows=400, delay_ms=10, priority=-5)
    wait_for(lambda: processed(url, low) > 0, what="the low priority's first rows")
    high = create(url, log, rows=200, delay_ms=10, priority=5)
    start_low = processed(url, low)

    final = wait_terminal(url, high, timeout=60)

    assert final["status"] == "Completed"
    low_status: dict[str, Any] = status_of(url, low)
    assert low_status["status"] == "Running"  # created first, yet it came second
    low_rows = int(low_status["processedRows"]) - start_low
    assert 0 < low_rows < 200 / 2, low_rows  # at least some share, far less than high's
    detail = httpx.get(f"{url}/api/bulks/{high}").json()
    assert detail["priority"] == 5
    wait_terminal(url, low, timeout=60)
