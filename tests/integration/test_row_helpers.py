"""The rows of chunks run in a row helper process (a real child process): recorded as in
process, stopped by a cancel or a shutdown, and taken over here when the helper dies."""

from __future__ import annotations

import asyncio
import io
import math
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from openpyxl import Workbook

import bulkops as bo
from bulkops.engine.helper import pool as helper_pool
from bulkops.engine.helper.messages import Job, Progress
from bulkops.engine.helper.pool import RowHelper, RowHelpers
from bulkops.storage.records import ChunkRecord
from tests.integration.conftest import create_ok, runtime_of, wait_status, wait_until

OPERATIONS = str(Path(__file__).with_name("helper_operations.py"))
CHUNK_ROWS = 50
ROWS = 300
GATED = 120  # in the third chunk (rows 101-150)


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await make(row_helpers=1, **settings)``: a combined instance whose operations are
    loaded from ``helper_operations.py`` by path, with its helpers started.
    ``client.stop_app()`` ends the app's lifespan early."""
    async with AsyncExitStack() as stack:
        count = 0

        async def start(**overrides: Any) -> httpx.AsyncClient:
            nonlocal count
            count += 1
            values: dict[str, Any] = {
                "database_url": f"sqlite:///{tmp_path}/db{count}.sqlite",
                "files_url": f"file://{tmp_path}/files{count}",
                "operations": [OPERATIONS],
                "chunk_rows": CHUNK_ROWS,
                "flush_interval": 0.05,
                "row_helpers": 1,
            }
            values.update(overrides)
            app = bo.create_app(None, bo.Settings(**values))
            lifespan = AsyncExitStack()
            stack.push_async_callback(lifespan.aclose)
            await lifespan.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bulkops.test"
            )
            await stack.enter_async_context(client)
            client.runtime = app.state.runtime  # type: ignore[attr-defined]
            client.stop_app = lifespan.aclose  # type: ignore[attr-defined]
            helpers = client.runtime.row_helpers  # type: ignore[attr-defined]
            if helpers is not None:
                await helpers.ready()  # else the first chunks run before a helper is up
            return client

        yield start


def helpers_of(client: httpx.AsyncClient) -> RowHelpers:
    helpers = runtime_of(client).row_helpers
    assert helpers is not None
    return helpers


def rows_csv(fail: dict[int, str] | None = None) -> str:
    """Rows 1..ROWS; ``fail`` maps a row to "invalid" (not a number) or "process"."""
    fail = fail or {}
    lines = ["n,fail"]
    for n in range(1, ROWS + 1):
        kind = fail.get(n, "")
        lines.append(f"x{n},{kind}" if kind == "invalid" else f"{n},{kind}")
    return "\n".join(lines) + "\n"


def processed(log: Path) -> list[tuple[int, int]]:
    """(row, pid) of every processed row, in order."""
    if not log.exists():
        return []
    return [
        (int(n), int(pid)) for n, pid in (line.split() for line in log.read_text().splitlines())
    ]


async def all_rows(client: httpx.AsyncClient, operation_id: str) -> list[dict[str, Any]]:
    page = await client.get(f"/api/bulks/{operation_id}/rows?pageSize=1000")
    items: list[dict[str, Any]] = page.json()["items"]
    return [_timeless(item) for item in items]


async def failure_events(client: httpx.AsyncClient, operation_id: str) -> list[str]:
    events = (await client.get(f"/api/bulks/{operation_id}/events?limit=1000")).json()
    return sorted(e["message"] for e in events if e["type"] == "RowFailed")


def counted(operation: str, metrics: str) -> list[str]:
    """The operation's rows-processed counter lines of a /metrics text."""
    return sorted(
        line
        for line in metrics.splitlines()
        if line.startswith("bulkops_rows_processed_total") and f'"{operation}"' in line
    )


def _timeless(value: Any) -> Any:
    """``value`` without its timestamps (keys ending in "At"), at any depth."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if not k.endswith("At")}
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


FAILURES = {7: "invalid", 64: "process", 65: "process", 170: "invalid", 299: "process"}


@pytest.mark.parametrize("operation", ["helper-rows", "helper-validated", "helper-batched"])
async def test_rows_run_in_the_helper_and_are_recorded_as_in_process(
    make: Callable[..., Any], tmp_path: Path, operation: str
) -> None:
    refused = set(range(3, ROWS + 1, 10)) if operation == "helper-validated" else set()
    failed = set(FAILURES) | refused
    results = {}
    seen = {}
    for helpers in (1, 0):
        client = await make(row_helpers=helpers)
        log = tmp_path / f"log-{helpers}"
        operation_id = await create_ok(
            client, rows_csv(FAILURES), operation=operation, metadata={"log": str(log)}
        )
        status = await wait_status(client, operation_id)
        ran = processed(log)
        results[helpers] = (status, await all_rows(client, operation_id), ran)
        seen[helpers] = (
            await failure_events(client, operation_id),
            counted(operation, (await client.get("/metrics")).text),
        )
        assert Counter(n for n, _ in ran) == Counter(
            n for n in range(1, ROWS + 1) if FAILURES.get(n) != "invalid" and n not in refused
        )  # every valid row processed once
        if helpers:
            pids = set(helpers_of(client).pids)
            assert pids and {pid for _, pid in ran} <= pids | {os.getpid()}
            assert any(pid in pids for _, pid in ran), "no row ran in the helper"
            metrics = (await client.get("/metrics")).text
            timed = f'bulkops_row_duration_seconds_count{{operation="{operation}"}}'
            if operation == "helper-batched":
                assert timed not in metrics  # as in process: batches time no row
            else:
                assert f"{timed} 300.0" in metrics
        else:
            assert {pid for _, pid in ran} == {os.getpid()}

    (with_status, with_rows, _), (without_status, without_rows, _) = results[1], results[0]
    assert with_status["status"] == without_status["status"] == "CompletedWithErrors"
    assert with_status["errorCount"] == without_status["errorCount"] == len(failed)
    assert with_rows == without_rows  # the same records, field by field
    assert seen[1] == seen[0]  # the same RowFailed events and row counters
    assert seen[1][0] and seen[1][1]
    assert {row["rowNumber"] for row in with_rows if row["state"] == "Failed"} == failed


async def gated(
    client: httpx.AsyncClient,
    tmp_path: Path,
    operation: str = "helper-rows",
    fail: dict[int, str] | None = None,
) -> tuple[str, Path, int]:
    """An operation whose row GATED waits in the helper: its id, log, and the helper pid."""
    gate, log = tmp_path / "gate", tmp_path / "log"
    gate.touch()
    operation_id = await create_ok(
        client,
        rows_csv(fail),
        operation=operation,
        metadata={"log": str(log), "gate": str(gate), "gate_row": GATED},
    )
    reached = tmp_path / "gate.reached"
    # Written by another process: it may exist a moment before its content does.
    await wait_until(
        lambda: _true(reached.exists() and bool(reached.read_text())), what="the gated row"
    )
    pid = int(reached.read_text())
    assert pid in helpers_of(client).pids  # it runs in the helper
    return operation_id, log, pid


@pytest.mark.parametrize("late", [False, True])
async def test_a_row_stuck_in_the_helper_holds_back_no_other_operation(
    make: Callable[..., Any], tmp_path: Path, late: bool
) -> None:
    """Another operation's rows run in-process while the helper is held up: taken there at
    once when the helper went quiet before they came (``late``), else queued behind the
    stuck job and withdrawn after ``PATIENCE`` of silence."""
    client = await make()
    stuck_id, stuck_log, helper_pid = await gated(client, tmp_path)
    if late:
        helper = helpers_of(client)
        await wait_until(lambda: _true(helper.take() is None), what="the helper seen held up")
    other_log = tmp_path / "other"
    other_id = await create_ok(
        client, rows_csv(), operation="helper-rows", metadata={"log": str(other_log)}
    )

    assert (await wait_status(client, other_id))["status"] == "Completed"
    assert (await client.get(f"/api/bulks/{stuck_id}/status")).json()["status"] == "Running"
    ran = processed(other_log)
    assert sorted(n for n, _ in ran) == list(range(1, ROWS + 1))  # each row once
    assert os.getpid() in {pid for _, pid in ran}  # not all of them waited for the helper

    (tmp_path / "gate").unlink()
    assert (await wait_status(client, stuck_id))["status"] == "Completed"
    assert sorted(n for n, _ in processed(stuck_log)) == list(range(1, ROWS + 1))
    assert helper_pid in helpers_of(client).pids  # the helper was never given up


async def test_a_cancel_stops_the_row_running_in_the_helper(
    make: Callable[..., Any], tmp_path: Path
) -> None:
    client = await make()
    operation_id, log, _ = await gated(client, tmp_path)
    # The rows before the gated one are reported (and stored) while it waits.
    await wait_until(
        lambda: _count(client, operation_id, "Completed", GATED - 1),
        what="the rows before the gated one stored",
    )

    assert (await client.post(f"/api/bulks/{operation_id}/cancel")).status_code == 200
    status = await wait_status(client, operation_id)
    # The helper was told to stop: the gated row is cancelled there, the run ends at once.
    await wait_until(
        lambda: _true(not runtime_of(client).scheduler.active), timeout=5, what="the run to end"
    )
    (tmp_path / "gate").unlink()

    assert status["status"] == "Cancelled"
    ran = [n for n, _ in processed(log)]
    assert ran == list(range(1, GATED))  # nothing after the gated row, which never ended
    assert await _count(client, operation_id, "Completed", GATED - 1)
    assert await _count(client, operation_id, "Failed", 0)


async def _count(client: httpx.AsyncClient, operation_id: str, state: str, count: int) -> bool:
    page = await client.get(f"/api/bulks/{operation_id}/rows?state={state}&pageSize=1")
    found: int = page.json()["totalCount"]
    return found == count


@pytest.mark.parametrize("operation", ["helper-rows", "helper-batched"])
async def test_rows_go_on_here_when_the_helper_dies(
    make: Callable[..., Any], tmp_path: Path, operation: str
) -> None:
    # An invalid row reported before the gated row's batch of seven (115-122) runs: the
    # rows of that batch before it are not reported yet, and must run after the helper dies.
    invalid = {117: "invalid"} if operation == "helper-batched" else {}
    client = await make()
    operation_id, log, pid = await gated(client, tmp_path, operation, invalid)
    # Wait for what the helper reports while it waits: rows 1-119, or 1-114 (row 117 is
    # held back until the batch before it is done: reports stay in row order).
    stored = GATED - 1 if not invalid else 114
    await wait_until(
        lambda: _processed(client, operation_id, stored), what="the reported rows stored"
    )

    os.kill(pid, signal.SIGKILL)
    (tmp_path / "gate").unlink()
    status = await wait_status(client, operation_id)

    assert status["status"] == ("CompletedWithErrors" if invalid else "Completed")
    assert status["processedRows"] == ROWS
    ran = processed(log)
    counts = Counter(n for n, _ in ran)
    assert set(counts) == set(range(1, ROWS + 1)) - set(invalid)
    assert all(count == 1 for count in counts.values())  # its rows were all reported
    assert {p for n, p in ran if n >= GATED}.isdisjoint({pid})  # the rest ran elsewhere
    events = (await client.get(f"/api/bulks/{operation_id}/events?limit=1000")).json()
    failed = [e["message"].split()[1] for e in events if e["type"] == "RowFailed"]
    assert failed == [str(n) for n in invalid]  # each failed row once, in events too


async def _processed(client: httpx.AsyncClient, operation_id: str, rows: int) -> bool:
    status = (await client.get(f"/api/bulks/{operation_id}/status")).json()
    return bool(status["processedRows"] == rows)


async def test_shutdown_stops_the_helper(make: Callable[..., Any], tmp_path: Path) -> None:
    client = await make(shutdown_timeout=0.2)
    _, log, pid = await gated(client, tmp_path)

    await client.stop_app()  # type: ignore[attr-defined]

    assert not _alive(pid)
    assert [n for n, _ in processed(log)] == list(range(1, GATED))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


async def _true(value: bool) -> bool:
    return value


@pytest.fixture
async def helper() -> AsyncIterator[RowHelper]:
    """One helper process of its own pool, started."""
    pool = RowHelpers(1, [OPERATIONS])
    await pool.ready()
    taken = pool.take()
    assert taken is not None
    try:
        yield taken
    finally:
        taken.release()
        await pool.close()


def job_of(path: Path, rows: int, **metadata: Any) -> Job:
    operation_id = uuid4()
    return Job(
        operation_id=operation_id,
        operation="helper-rows",
        metadata=metadata,
        path=str(path),
        file_format="csv",
        column_map=None,
        chunk=ChunkRecord(operation_id, 0, 1, rows, -1),
        report_interval=0.05,
    )


async def _no_wait() -> None:
    return None


async def test_a_stop_sent_right_behind_its_job_stops_it(helper: RowHelper, tmp_path: Path) -> None:
    rows, log, gate = tmp_path / "rows.csv", tmp_path / "log", tmp_path / "gate"
    rows.write_text(rows_csv())
    gate.touch()  # row 1 would wait here until the stop timeout killed the helper
    taken: list[Progress] = []
    job = job_of(rows, ROWS, log=str(log), gate=str(gate), gate_row=1)
    os.kill(helper.pid, signal.SIGSTOP)  # the helper finds the job and its Stop together
    try:
        running = asyncio.create_task(helper.run(job, taken.append, _no_wait))
        await asyncio.sleep(0)  # the job is written; the run waits for its first message
        running.cancel()
        for _ in range(5):  # loop turns (no time passes): the Stop is written
            await asyncio.sleep(0)
    finally:
        os.kill(helper.pid, signal.SIGCONT)

    async with asyncio.timeout(5):  # a lost Stop waits 10 s, then kills the helper
        with pytest.raises(asyncio.CancelledError):
            await running
    assert helper.alive
    assert processed(log) == []

    # The same helper runs its next job whole: nothing of the stopped one is taken for it.
    gate.unlink()
    finished = await helper.run(job_of(rows, ROWS, log=str(log)), taken.append, _no_wait)
    assert finished.failure is None
    assert [n for n, _ in processed(log)] == list(range(1, ROWS + 1))


async def test_failing_rows_are_reported_as_they_go(helper: RowHelper, tmp_path: Path) -> None:
    count = 5_000  # more than two reports' worth
    rows = tmp_path / "rows.csv"
    rows.write_text("n,fail\n" + "".join(f"x{n},\n" for n in range(count)))
    taken: list[Progress] = []

    await helper.run(job_of(rows, count, log=str(tmp_path / "log")), taken.append, _no_wait)

    assert sum(len(progress.failed) for progress in taken) == count
    assert len(taken) >= 3  # on the way, not one message at the end
    assert [progress.upto for progress in taken] == sorted(progress.upto for progress in taken)


def job_after(job: Job, rows: int, **metadata: Any) -> Job:
    """The job of ``job``'s operation's next chunk: ``rows`` rows after its rows."""
    chunk = job.chunk
    first = chunk.first_row + chunk.row_count
    following = ChunkRecord(job.operation_id, chunk.index + 1, first, rows, -1)
    return replace(job, metadata=metadata, chunk=following)


async def test_a_job_sent_ahead_runs_right_after_the_one_before(
    helper: RowHelper, tmp_path: Path
) -> None:
    rows, log = tmp_path / "rows.csv", tmp_path / "log"
    rows.write_text(rows_csv())
    first = job_of(rows, 100, log=str(log))
    taken: list[Progress] = []

    sent = [await helper.submit(first), await helper.submit(job_after(first, 200, log=str(log)))]
    ends = [await helper.follow(job, taken.append, _no_wait) for job in sent]

    assert [(end.failure, end.stopped) for end in ends] == [(None, False), (None, False)]
    assert [n for n, _ in processed(log)] == list(range(1, ROWS + 1))
    assert taken[-1].upto == ROWS


async def test_a_stopped_job_drops_the_jobs_of_its_operation_sent_behind_it(
    helper: RowHelper, tmp_path: Path
) -> None:
    rows, log, other_log, gate = (tmp_path / name for name in ("rows.csv", "log", "other", "gate"))
    rows.write_text(rows_csv())
    gate.touch()
    first = job_of(rows, 100, log=str(log), gate=str(gate), gate_row=50)
    running = await helper.submit(first)
    behind = await helper.submit(job_after(first, 200, log=str(log)))
    other = await helper.submit(job_of(rows, 10, log=str(other_log)))  # another operation's
    taken: list[Progress] = []
    following = asyncio.create_task(helper.follow(running, taken.append, _no_wait))
    await wait_until(lambda: _true(Path(f"{gate}.reached").exists()), what="the gated row")
    # Rows 1-49 reported: the follower runs (a task cancelled before its first step would
    # never send the Stop, and the jobs behind would wait for it for ever).
    await wait_until(lambda: _true(bool(taken)), what="the rows before the gate reported")

    following.cancel()  # as a cancel or a shutdown of its run does: Stop
    with pytest.raises(asyncio.CancelledError):
        await following
    dropped = await helper.follow(behind, taken.append, _no_wait)
    ran_other = await helper.follow(other, taken.append, _no_wait)

    assert dropped.stopped and dropped.failure is None  # never started: its run goes on itself
    assert [n for n, _ in processed(log)] == list(range(1, 50))
    assert (ran_other.stopped, [n for n, _ in processed(other_log)]) == (False, list(range(1, 11)))


def _rows_in(taken: list[Progress]) -> int:
    return sum(last - first + 1 for progress in taken for first, last, _ in progress.spans)


async def _slow_room() -> None:
    """A recorder slow to make room: the other follower would read on meanwhile."""
    await asyncio.sleep(0.01)


async def test_jobs_followed_at_once_are_read_in_the_order_they_were_sent(
    helper: RowHelper, tmp_path: Path
) -> None:
    rows, log, other_log = tmp_path / "rows.csv", tmp_path / "log", tmp_path / "other"
    rows.write_text(rows_csv())
    first = await helper.submit(job_of(rows, 250, log=str(log)))
    second = await helper.submit(job_of(rows, 10, log=str(other_log)))  # another operation's
    taken: dict[str, list[Progress]] = {"first": [], "second": []}

    # The second is followed first: it must wait for the first's messages to be read.
    later = asyncio.create_task(helper.follow(second, taken["second"].append, _no_wait))
    await asyncio.sleep(0)
    async with asyncio.timeout(10):  # a message read by the wrong follower never comes again
        ends = await asyncio.gather(helper.follow(first, taken["first"].append, _slow_room), later)

    assert [(end.failure, end.stopped) for end in ends] == [(None, False), (None, False)]
    assert (_rows_in(taken["first"]), _rows_in(taken["second"])) == (250, 10)


async def test_the_pool_queues_jobs_behind_the_least_busy_helper(tmp_path: Path) -> None:
    rows, gate = tmp_path / "rows.csv", tmp_path / "gate"
    rows.write_text(rows_csv())
    gate.touch()
    pool = RowHelpers(2, [OPERATIONS])
    assert pool.take() is None  # none up yet: the rows run in-process meanwhile
    await pool.ready()
    try:
        first, second = pool.take(), pool.take()
        assert first is not None and second is not None and first is not second
        gated = job_of(rows, 10, log=str(tmp_path / "a"), gate=str(gate), gate_row=1)
        await first.submit(gated)
        await second.submit(gated)
        await second.submit(job_of(rows, 10, log=str(tmp_path / "b")))
        assert (first.jobs, second.jobs) == (1, 2)
        assert pool.take() is first  # both busy: behind the one holding fewer jobs
    finally:
        gate.unlink()
        await pool.close()


async def test_a_job_waiting_behind_a_stuck_one_is_withdrawn_unrun(
    helper: RowHelper, tmp_path: Path
) -> None:
    rows, log, other_log, gate = (tmp_path / name for name in ("rows.csv", "log", "other", "gate"))
    rows.write_text(rows_csv())
    gate.touch()
    stuck = await helper.submit(job_of(rows, 100, log=str(log), gate=str(gate), gate_row=50))
    waiting = await helper.submit(job_of(rows, 10, log=str(other_log)))  # another operation's
    taken: list[Progress] = []

    async with asyncio.timeout(10):
        withdrawn = await helper.follow(waiting, taken.append, _no_wait)

    assert withdrawn.stopped and withdrawn.failure is None
    assert taken == [] and processed(other_log) == []  # none of its rows ran in the helper
    assert helper.backlog() == math.inf  # held up: no job is queued behind it now
    gate.unlink()
    finished = await helper.follow(stuck, taken.append, _no_wait)
    assert (finished.stopped, finished.failure) == (False, None)
    assert [n for n, _ in processed(log)] == list(range(1, 101))
    assert processed(other_log) == []  # never started later either


async def test_a_helper_whose_jobs_ended_is_free_before_their_ends_are_read(
    helper: RowHelper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose Finished came but was not read yet (its run busy elsewhere) holds
    nothing up: the idle helper takes the next job at once, however long that lasts."""
    monkeypatch.setattr(helper_pool, "PATIENCE", 0.05)
    rows = tmp_path / "rows.csv"
    rows.write_text(rows_csv())
    done = await helper.submit(job_of(rows, 10, log=str(tmp_path / "log")))
    entry = helper._inboxes.open[done.id]
    busy = asyncio.Event()  # its run is busy elsewhere after taking its rows

    async def held() -> None:
        await busy.wait()

    following = asyncio.create_task(helper.follow(done, lambda _: None, held))
    await wait_until(lambda: _true(entry.finished), what="its end reported")
    quiet_from = time.monotonic()
    await wait_until(lambda: _true(time.monotonic() - quiet_from > 0.3), what="a quiet while")

    assert helper.backlog() == 0.0
    busy.set()
    assert (await following).stopped is False


async def test_a_job_sent_ahead_never_starts_after_a_stopped_one(
    helper: RowHelper, tmp_path: Path
) -> None:
    rows, log, gate = tmp_path / "rows.csv", tmp_path / "log", tmp_path / "gate"
    rows.write_text(rows_csv())
    gate.touch()
    first = job_of(rows, 100, log=str(log), gate=str(gate), gate_row=50)
    running = await helper.submit(first)
    taken: list[Progress] = []
    following = asyncio.create_task(helper.follow(running, taken.append, _no_wait))
    await wait_until(lambda: _true(Path(f"{gate}.reached").exists()), what="the gated row")
    await wait_until(lambda: _true(bool(taken)), what="the rows before the gate reported")
    following.cancel()  # the Stop goes out before the next chunk's job is sent ahead
    for _ in range(5):
        await asyncio.sleep(0)
    behind = await helper.submit(replace(job_after(first, 200, log=str(log)), ahead=True))
    with pytest.raises(asyncio.CancelledError):
        await following

    dropped = await helper.follow(behind, lambda _: None, _no_wait)

    assert dropped.stopped  # its run goes on in the parent, after its own status check
    assert [n for n, _ in processed(log)] == list(range(1, 50))


async def test_a_job_sent_ahead_never_starts_after_a_failed_one(
    helper: RowHelper, tmp_path: Path
) -> None:
    rows, log = tmp_path / "rows.csv", tmp_path / "log"
    head = b"n,fail\n" + b"".join(f"{n},\n".encode() for n in range(1, 50)) + b"\xff\xfe,\n"
    tail = b"".join(f"{n},\n".encode() for n in range(51, ROWS + 1))
    rows.write_bytes(head + tail)
    offset = len(head + b"".join(f"{n},\n".encode() for n in range(51, 101)))
    first = job_of(rows, 100, log=str(log))
    behind = replace(
        job_after(first, 200, log=str(log)),
        chunk=ChunkRecord(first.operation_id, 1, 101, 200, offset),
        ahead=True,
    )
    sent = [await helper.submit(first), await helper.submit(behind)]

    failed, dropped = [await helper.follow(job, lambda _: None, _no_wait) for job in sent]

    assert failed.failure is not None and "UTF-8" in failed.failure
    assert dropped.stopped and dropped.failure is None
    assert all(n < 100 for n, _ in processed(log))


async def test_the_chunks_of_a_chosen_worksheet_run_in_the_helper(
    make: Callable[..., Any], tmp_path: Path
) -> None:

    book = Workbook()
    book.active.title = "Notes"
    book.active.append(["n"])
    book.active.append([999])
    sheet = book.create_sheet("Rows")
    sheet.append(["n"])
    for n in range(1, ROWS + 1):
        sheet.append([n])
    content = io.BytesIO()
    book.save(content)
    client = await make(row_helpers=1)
    log = tmp_path / "log"

    operation_id = await create_ok(
        client,
        content.getvalue(),
        operation="helper-rows",
        metadata={"log": str(log)},
        file_name="rows.xlsx",
        extra={"sheet": "Rows"},
    )
    status = await wait_status(client, operation_id)

    assert (status["status"], status["totalRows"]) == ("Completed", ROWS)
    ran = processed(log)
    assert sorted(n for n, _ in ran) == list(range(1, ROWS + 1))
    assert any(pid in helpers_of(client).pids for _, pid in ran), "no row ran in the helper"


async def test_a_dry_run_validates_in_the_helper_and_a_run_from_it_reads_its_fixes_there(
    make: Callable[..., Any], tmp_path: Path
) -> None:
    client = await make(row_helpers=1)
    first, second = tmp_path / "first", tmp_path / "second"
    dry = await create_ok(
        client,
        rows_csv({7: "invalid", 170: "invalid"}),
        operation="helper-tracked",
        metadata={"log": str(first)},
        extra={"dryRun": "true"},
    )
    status = await wait_status(client, dry)
    assert (status["status"], status["errorCount"], status["processedRows"]) == (
        "CompletedWithErrors",
        2,
        ROWS,
    )
    assert not first.exists()  # nothing processed
    pids = set(helpers_of(client).pids)
    validated = processed(Path(f"{first}.validated"))
    assert len(validated) == ROWS - 2
    assert any(pid in pids for _, pid in validated), "no row was validated in the helper"

    fixed = await client.patch(
        f"/api/bulks/{dry}/rows/170", json={"rowData": {"n": "170", "fail": ""}}
    )
    assert fixed.status_code == 200, fixed.text
    response = await client.post(
        "/api/bulks",
        data={"sourceOperationId": dry, "dryRun": "true", "metadata": f'{{"log": "{second}"}}'},
        files={"unused": ("", b"", "text/plain")},
    )
    assert response.status_code == 201, response.text
    again = response.json()["operationId"]
    status = await wait_status(client, again)
    assert (status["status"], status["errorCount"]) == ("CompletedWithErrors", 1)
    errors = (await client.get(f"/api/bulks/{again}/errors")).json()["items"]
    assert [e["rowNumber"] for e in errors] == [7]
    validated = processed(Path(f"{second}.validated"))
    assert 170 in {n for n, _ in validated} and not second.exists()
    assert any(pid in pids for _, pid in validated)
