"""A run that waits for a row slot of its process keeps nothing finished in memory: the rows
it ran are stored while it waits, so a kill -9 then repeats none of them.

One process, 10 row slots (``BULKOPS_WORKER_COUNT`` 1 x MaxRowConcurrency 10). A
low-priority import runs; a higher-priority operation whose rows wait for a gate file then
takes every slot the import gives back, so the import waits for a slot as long as the gate
stays shut. Before the fix, the import's last rows finished during that wait and stayed in
its window, unstored, until it got a slot again: the kill ran them twice (the chaos run's
kills repeated up to 191 executions that way, a process running chunks of many operations at
once)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.conftest import Process, serve, status_of, wait_for, wait_terminal
from tests.e2e.faults import runs

ROWS = 400
DEADLINE = 60  # seconds for the waiting import's finished rows to be stored
QUIET = 1.0  # seconds without a row of the import: it waits for a slot


def create(
    url: str, name: str, rows: list[str], metadata: dict[str, str | int], priority: int
) -> str:
    content = "name\n" + "".join(f"{row}\n" for row in rows)
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": name, "metadata": json.dumps(metadata), "priority": str(priority)},
        files={"file": ("rows.csv", content.encode(), "text/csv")},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


def test_a_run_waiting_for_a_slot_has_its_finished_rows_stored_and_a_kill_repeats_none(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    settings = {"worker_count": 1, "max_row_concurrency": 10, "abandon_after": 3}
    process, url = serve(spawn, "--worker-processes", "0", **settings)
    log, gated_log, gate = tmp_path / "import.log", tmp_path / "gated.log", tmp_path / "gate"
    names = [f"r{n}" for n in range(1, ROWS + 1)]
    low = create(url, "slow-log", names, {"log": str(log), "delayMs": 50}, priority=-5)
    wait_for(lambda: len(runs(log)) >= 20, timeout=120, what="the import under way")
    waits = [f"wait{n}" for n in range(1, 11)]
    high = create(url, "file-gated", waits, {"gate": str(gate), "log": str(gated_log)}, 5)

    def gated_running() -> bool:
        return status_of(url, high).get("status") == "Running"

    wait_for(gated_running, timeout=120, what="the gated operation claimed")
    seen = {"ran": -1, "since": time.monotonic()}

    def waiting_and_stored() -> bool:
        # Every row the import ran is stored, and it ran none for a while: every slot is
        # the gated rows' (a row of the import takes 50 ms).
        ran = sum(runs(log).values())
        if ran != seen["ran"]:
            seen.update(ran=ran, since=time.monotonic())
            return False
        quiet = time.monotonic() - seen["since"] >= QUIET
        return quiet and status_of(url, low).get("processedRows", -1) == ran

    wait_for(waiting_and_stored, timeout=DEADLINE, what="the waiting import's rows stored")
    ran_before = set(runs(log))
    assert len(ran_before) < ROWS  # it waits: the gated rows hold every slot
    process.signal(signal.SIGKILL)
    process.wait()

    gate.touch()
    _, url = serve(spawn, "--worker-processes", "0", **settings)
    assert wait_terminal(url, low, timeout=180)["status"] == "Completed"
    assert wait_terminal(url, high, timeout=180)["status"] == "Completed"
    counts = runs(log)
    assert set(counts) == set(names)
    twice = sorted(name for name, count in counts.items() if count > 1)
    assert twice == [], twice  # every row it ran before the kill was stored
