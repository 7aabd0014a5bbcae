"""``serve``'s worker processes: real processes, started, restarted and ended with serve."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Process, Spawner, serve, status_of, wait_for, wait_terminal

WORKERS = "2"


def worker_pids(process: Process) -> set[int]:
    """The live worker processes of a serve (its child processes)."""
    found: set[int] = set()
    tasks = Path(f"/proc/{process.popen.pid}/task")
    for task in tasks.iterdir() if tasks.exists() else ():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:
            continue
    return {pid for pid in found if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its exit status is left


def two_workers(process: Process) -> set[int]:
    wait_for(lambda: len(worker_pids(process)) == 2, what="two worker processes")
    return worker_pids(process)


def upload(url: str, content: bytes, operation: str, metadata: dict[str, str]) -> str:
    response = httpx.post(
        f"{url}/api/bulks",
        data={"operationName": operation, "metadata": json.dumps(metadata)},
        files={"file": ("rows.csv", content, "text/csv")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["operationId"])


def names(count: int, prefix: str = "r") -> bytes:
    return ("name\n" + "".join(f"{prefix}{i}\n" for i in range(count))).encode()


def logged(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def rows_processed(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("bulkops_rows_processed_total{")
    )


def test_two_worker_processes_do_the_processing_and_metrics_count_it(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process, url = serve(spawn, "--worker-processes", WORKERS)
    pids = two_workers(process)
    log = tmp_path / "log"
    operation_id = upload(url, names(40), "slow-log", {"log": str(log), "delay_ms": "5"})
    final = wait_terminal(url, operation_id)
    assert (final["status"], final["processedRows"]) == ("Completed", 40)
    assert sorted(logged(log)) == sorted(f"r{i}" for i in range(40))
    wait_for(lambda: rows_processed(url) == 40, what="/metrics to count the 40 rows")
    # Their log lines reach serve's output, tagged.
    wait_for(
        lambda: all(f"[worker-{i}]" in process.output() for i in (1, 2)),
        what="the worker processes' tagged log lines",
    )
    assert worker_pids(process) == pids


def test_a_killed_worker_process_is_restarted_and_the_work_finishes(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process, url = serve(spawn, "--worker-processes", WORKERS, max_row_concurrency="4")
    first = two_workers(process)
    log = tmp_path / "log"
    operation_id = upload(url, names(100), "slow-log", {"log": str(log), "delay_ms": "100"})
    wait_for(lambda: len(logged(log)) >= 5, what="rows to be processed")
    for victim in first:  # the one processing among them
        os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: len(worker_pids(process)) == 2 and not worker_pids(process) & first,
        what="the killed worker processes to be replaced",
    )
    final = wait_terminal(url, operation_id, timeout=120)
    assert (final["status"], final["processedRows"]) == ("Completed", 100)
    assert set(logged(log)) == {f"r{i}" for i in range(100)}
    assert "restarting it" in process.output()


def test_kill_9_of_serve_leaves_no_worker_process(spawn: Spawner) -> None:
    # A temporary directory of their own (short: it holds Unix sockets): a serve that
    # another test starts meanwhile would remove what the killed one left behind.
    private = tempfile.mkdtemp(prefix="bulkops-test-")
    spawn.base_env["TMPDIR"] = private
    try:
        _kill_9_of_serve_leaves_no_worker_process(spawn, private)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _kill_9_of_serve_leaves_no_worker_process(spawn: Spawner, private: str) -> None:
    process, _ = serve(spawn, "--worker-processes", WORKERS)
    pids = two_workers(process)
    process.signal(signal.SIGKILL)
    process.wait()
    wait_for(
        lambda: not any(_alive(pid) for pid in pids),
        timeout=10,
        what="the worker processes to end with serve",
    )
    # The next serve removes the temporary directory the killed one left behind.
    prefix = f"bulkops-serve-{process.popen.pid}-"
    assert [p for p in os.listdir(private) if p.startswith(prefix)]
    serve(spawn, "--worker-processes", "1")
    assert not [p for p in os.listdir(private) if p.startswith(prefix)]


def test_sigterm_drains_the_worker_processes_and_leaves_nothing(
    spawn: Callable[..., Process],
) -> None:
    process, _ = serve(spawn, "--worker-processes", WORKERS)
    pids = two_workers(process)
    wait_for(
        lambda: all(f"worker-{i} started" in process.output() for i in (1, 2)),
        what="the worker processes to start",
    )
    process.signal(signal.SIGTERM)
    assert process.wait() in (0, -signal.SIGTERM)  # uvicorn raises it again when done
    assert not any(_alive(pid) for pid in pids)
    assert "Worker process worker-1 stopping" in process.output()
    prefix = f"bulkops-serve-{process.popen.pid}-"
    assert not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(prefix)]


def rows_of(url: str, operation_id: str, **params: Any) -> dict[int, dict[str, Any]]:
    body = httpx.get(f"{url}/api/bulks/{operation_id}/rows", params=params).json()
    return {item["rowNumber"]: item for item in body["items"]}


def test_signal_and_cancel_reach_rows_in_a_worker_process_at_once(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    # Pollers so slow that only a wake-up can deliver in time.
    process, url = serve(
        spawn,
        "--worker-processes",
        WORKERS,
        signal_poll_interval="60",
        max_row_concurrency="4",
    )
    two_workers(process)
    log = tmp_path / "log"
    approval = upload(url, b"name\nann\nbob\n", "e2e-approval", {"log": str(log)})
    wait_for(
        lambda: len(rows_of(url, approval, state="WaitingForCompletion")) == 2,
        what="both rows waiting in a worker process",
    )
    response = httpx.post(f"{url}/api/bulks/{approval}/signal/ann")
    assert response.status_code == 200 and response.json()["crossProcess"] is True
    wait_for(
        lambda: "done ann" in logged_lines(log),
        timeout=10,
        what="the signal to reach the row in its worker process",
    )

    gated = tmp_path / "gated"
    metadata = {"gate": str(tmp_path / "gate"), "log": str(gated)}
    cancelled = upload(url, b"name\na\nwait-b\n", "file-gated", metadata)
    wait_for(lambda: logged(gated) == ["a"], what="row a to be processed")
    assert httpx.post(f"{url}/api/bulks/{cancelled}/cancel").status_code == 200
    wait_for(
        lambda: f"Left operation {cancelled}: cancelled" in process.output(),
        timeout=10,
        what="the worker process to leave the cancelled operation",
    )
    (tmp_path / "gate").touch()
    assert status_of(url, cancelled)["status"] == "Cancelled"
    assert logged(gated) == ["a"]
    httpx.post(f"{url}/api/bulks/{approval}/signal/bob")
    assert wait_terminal(url, approval)["status"] == "Completed"


def logged_lines(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_zero_worker_processes_processes_in_the_http_process(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process, url = serve(spawn, "--worker-processes", "0")
    log = tmp_path / "log"
    operation_id = upload(url, names(10), "slow-log", {"log": str(log)})
    assert wait_terminal(url, operation_id)["processedRows"] == 10
    assert worker_pids(process) == set()
    assert rows_processed(url) == 10


@pytest.mark.postgres
def test_worker_processes_on_postgresql(
    spawn: Callable[..., Process], tmp_path: Path, empty_postgres_url: str
) -> None:
    process, url = serve(spawn, "--worker-processes", WORKERS, database_url=empty_postgres_url)
    two_workers(process)
    log = tmp_path / "log"
    operation_id = upload(url, names(30), "slow-log", {"log": str(log), "delay_ms": "5"})
    final = wait_terminal(url, operation_id)
    assert (final["status"], final["processedRows"]) == ("Completed", 30)
    assert sorted(logged(log)) == sorted(f"r{i}" for i in range(30))
    wait_for(lambda: rows_processed(url) == 30, what="/metrics to count the rows")
