"""A worker killed during an undo: the restarted service resumes the undo operation, and
each completed step's undo takes effect exactly once per row, in reverse step order."""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.conftest import Process, serve, wait_for, wait_terminal
from tests.e2e.test_faults import reached

ROWS = 400
ABANDON_AFTER = 600  # the restarted process sees the dead one's process id gone at once


def test_an_undo_survives_a_killed_worker_without_skipping_or_doubling(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    settings = {"abandon_after": ABANDON_AFTER, "max_row_concurrency": 10}
    process, url = serve(spawn, **settings)
    log, effects = tmp_path / "undo-calls.log", tmp_path / "effects.db"
    content = "name\n" + "".join(f"r{n}\n" for n in range(1, ROWS + 1))
    metadata = {"log": str(log), "effects": str(effects), "delayMs": 40}
    created = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": "e2e-undo", "metadata": json.dumps(metadata)},
        files={"file": ("rows.csv", content.encode(), "text/csv")},
    )
    assert created.status_code == 201, created.text
    original = created.json()["operationId"]
    assert wait_terminal(url, original, timeout=120)["status"] == "Completed"

    undo = httpx.post(f"{url}/api/bulks/{original}/undo")
    assert undo.status_code == 201, undo.text
    undo_id = undo.json()["id"]
    wait_for(reached(url, undo_id, ROWS * 3 // 10), timeout=120, what="30% of the undos")
    process.signal(signal.SIGKILL)
    process.wait()
    done_before = len(log.read_text().splitlines())
    assert done_before < ROWS * 2  # killed part way

    _, url = serve(spawn, **settings)
    final = wait_terminal(url, undo_id, timeout=120)
    assert (final["status"], final["processedRows"]) == ("Completed", ROWS)

    with sqlite3.connect(effects) as db:
        kept = dict(db.execute("SELECT key, row FROM effects").fetchall())
    expected = {f"{undo_id}:{n}:{step}": f"r{n}" for n in range(1, ROWS + 1) for step in (2, 0)}
    assert kept == expected  # every completed step's undo, once, under the undo's keys

    calls = [line.split() for line in log.read_text().splitlines()]
    first_seen: dict[tuple[str, str], int] = {}
    for position, (name, step, _) in enumerate(calls):
        first_seen.setdefault((name, step), position)
    for n in range(1, ROWS + 1):  # the last step is undone first
        assert first_seen[(f"r{n}", "2")] < first_seen[(f"r{n}", "0")]
    repeated = len(calls) - len(expected)
    # Only the rows in flight at the kill (10 slots, and those awaiting their write) ran
    # a call again; their effects were kept once by the key.
    assert repeated <= 3 * 10 * 2
    print(f"\n{repeated} undo calls repeated after the kill (kept once by their key)")
