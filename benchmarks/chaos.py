"""The chaos run: compound faults against PostgreSQL, one API process and several workers.

A private PostgreSQL server (``initdb`` in a temporary directory, its own port: never a
shared server) holds the operations of one ``bulkops serve --role api`` process and
``workers`` ``bulkops worker`` processes. Operations of row operations (``delay_ms`` rows)
and two-step pipelines (``delay_ms / 2`` steps) are submitted while faults come every
1.5-4 s, in shuffled rounds of the three kinds:

- ``kill``: a worker is killed with SIGKILL and a new one started;
- ``terminate``: every client connection of the database is terminated
  (``pg_terminate_backend``);
- ``restart``: the database is stopped for 1-5 s and started again;
- ``partition``: the proxy between every process and the database stops forwarding for
  2-6 s without closing anything (a silent partition; ``BULKOPS_STORAGE_TIMEOUT`` 3 s);
- ``store``: the S3 file store (moto's server, behind a proxy of its own) refuses
  connections or answers 503 for 2-6 s.

Each (row, step) execution appends a line to a log (``chaos_operations.py``): the row, the
step, the process that ran it and when it ended. An execution followed by another of the
same (row, step) is a repeat, blamed on the one fault that can have lost it (``blame``):
the kill of the process that ran it, when that process was killed between the two; else
the database fault (connections terminated, restart) in progress when it ended, else the
first to begin after it, else the last to end shortly before it. A kill of another process
is never blamed. A repeat no fault explains (a live worker's chunk taken over because its
heartbeat aged on a loaded machine) is counted apart, as ``unexplained``. Invariants,
checked at the end: every operation final (Completed) with all rows; every (row, step) ran;
at most ``2 x workers x MaxRowConcurrency`` repeats per fault on average, the unexplained
ones included (the command line holds each fault to it); the operation's counters equal
its stored rows; one Created and one Completed event per operation; no duplicate event
sequence; no answer 500 to any request of the run.

``python -m benchmarks.chaos --seconds 60 --seeds 1,2,3`` (``make chaos``) runs it from the
command line; ``tests/e2e/test_chaos.py`` runs a short one in the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from tests.e2e.faults import TcpProxy

from benchmarks.chaos_operations import CHAOS_PIPELINE, CHAOS_ROWS

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = Path(__file__).resolve().with_name("chaos_operations.py")
KINDS = ("kill", "terminate", "restart", "partition", "store")
STORAGE_TIMEOUT = 3.0  # BULKOPS_STORAGE_TIMEOUT of the run's processes
S3_REGION = "us-east-1"
# Seconds after a database fault ends during which it may still lose rows: a write's retries
# back off up to 2 s, and a lease checks its holder every few seconds.
AFTERMATH = 10.0
FINAL = {"Completed", "CompletedWithErrors", "Failed", "Cancelled"}
# The operation's stored rows and those stored Completed: row records, and the rows of its
# spans (plain completions, one ``row_spans`` row per run of consecutive rows).
_STORED_ROWS = (
    "SELECT sum(total), sum(completed) FROM ("
    "SELECT count(*) AS total, count(*) FILTER (WHERE state = 'Completed') AS completed "
    "FROM row_records WHERE operation_id = %(id)s UNION ALL "
    "SELECT sum(last_row - first_row + 1), sum(last_row - first_row + 1) FROM row_spans "
    "WHERE operation_id = %(id)s) AS stored"
)


class ChaosError(AssertionError):
    """An invariant of the chaos run did not hold (or a part of it did not start)."""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_bin() -> Path:
    """The directory of the newest installed PostgreSQL server programs."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise ChaosError("initdb not found: install the PostgreSQL server programs")
    return Path(initdb).parent


class PrivateServer:
    """A PostgreSQL server of its own in ``directory`` on a free port (trust auth).

    The server programs refuse to run as root: as root they run as the ``postgres`` user.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = directory / "pgdata"
        self.port = _free_port()
        self._bin = postgres_bin()
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        command = [*self._as, str(self._bin / program), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise ChaosError(f"{program} failed: {result.stdout}{result.stderr}")

    def create(self) -> None:
        """initdb and start."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._as:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
        self.start()

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=300 -c log_lock_waits=on -c deadlock_timeout=200ms "
            "-c log_min_duration_statement=300"
        )
        log = str(self.directory / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate`` is a crash; ``fast`` ends sessions first)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def terminate_clients(self) -> int:
        """Terminate every client connection but this one; how many."""
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            found = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchall()
        return len(found)


class S3Server:
    """moto's S3 server on a free loopback port, with one bucket, in this process."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.bucket = "bulkops-chaos"
        self._server: Any = None

    def start(self) -> None:
        """Start the server and create the bucket."""
        import logging

        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        client = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            region_name=S3_REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket=self.bucket)

    def stop(self) -> None:
        """Stop the server."""
        if self._server is not None:
            self._server.stop()
            self._server = None


class Bulkops:
    """One ``bulkops`` process of the run, with its log."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._handle = log.open("ab")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bulkops", *args],
            cwd=ROOT,
            env=env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        """SIGKILL, and wait for the end."""
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._handle.close()

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 20 s)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._handle.close()


@dataclass
class Fault:
    """One fault: its kind, when it began and ended (``time.time()``), the process it
    killed (a kill) and what it did."""

    kind: str
    at: float
    end: float = 0.0
    victim: int | None = None
    detail: str = ""
    repeats: int = 0


def blame(faults: list[Fault], ended: float, pid: int, redone: float) -> Fault | None:
    """The fault that lost an execution by process ``pid`` that ended at ``ended`` and ran
    again at ``redone`` (None: no fault explains it).

    The kill of ``pid`` between the two, if any: its finished rows that were not stored died
    with it. Else a database fault: the one in progress when the execution ended, else the
    first to begin after it, else the last to end at most ``AFTERMATH`` seconds before it.
    """
    for fault in faults:
        if fault.victim == pid and fault.at <= redone and ended <= fault.end:
            return fault
    database = [fault for fault in faults if fault.kind != "kill" and fault.at <= redone]
    for fault in database:
        if fault.at <= ended <= fault.end:
            return fault
    for fault in database:
        if fault.at >= ended:
            return fault
    before = [fault for fault in database if ended - AFTERMATH <= fault.end < ended]
    return before[-1] if before else None


@dataclass
class Outcome:
    """What a chaos run measured."""

    seed: int
    workers: int
    max_row_concurrency: int
    operations: int
    rows: int
    executions: int
    faults: list[Fault] = field(default_factory=list)
    repeats: int = 0
    unexplained: int = 0  # repeats no fault explains (counted in ``repeats`` too)
    seconds: float = 0.0
    answers: Counter[int] = field(default_factory=Counter)

    @property
    def bound(self) -> int:
        """Repeats allowed per fault: 2 x workers x MaxRowConcurrency."""
        return 2 * self.workers * self.max_row_concurrency

    @property
    def worst(self) -> int:
        """The most repeats of one fault."""
        return max((fault.repeats for fault in self.faults), default=0)

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Per fault kind: how many faults, the repeats they caused, the most of one."""
        kinds: dict[str, dict[str, int]] = {}
        for fault in self.faults:
            entry = kinds.setdefault(fault.kind, {"faults": 0, "repeats": 0, "most": 0})
            entry["faults"] += 1
            entry["repeats"] += fault.repeats
            entry["most"] = max(entry["most"], fault.repeats)
        return kinds

    def summary(self) -> dict[str, Any]:
        """The figures as JSON-ready values."""
        return {
            "seed": self.seed,
            "workers": self.workers,
            "max_row_concurrency": self.max_row_concurrency,
            "operations": self.operations,
            "rows": self.rows,
            "executions": self.executions,
            "faults": len(self.faults),
            "repeats": self.repeats,
            "unexplained": self.unexplained,
            "worst_fault": self.worst,
            "bound_per_fault": self.bound,
            "by_kind": self.by_kind(),
            "seconds": round(self.seconds, 1),
            "answers": {str(code): count for code, count in sorted(self.answers.items())},
        }


class Chaos:
    """One chaos run (see the module's docstring); ``run()`` returns the ``Outcome`` or
    raises ``ChaosError`` naming the invariant that failed."""

    def __init__(
        self,
        directory: Path,
        *,
        seed: int,
        seconds: float,
        workers: int = 3,
        max_row_concurrency: int = 10,
        rows: int = 1500,
        delay_ms: int = 10,
        abandon_after: float = 3.0,
        chunk_rows: int = 1000,
        env: dict[str, str] | None = None,
        kinds: tuple[str, ...] = KINDS,
    ) -> None:
        self.directory = directory
        self.kinds = kinds  # the kinds of fault dealt, in shuffled rounds
        self.seed = seed
        self.seconds = seconds
        self.workers = workers
        self.max_row_concurrency = max_row_concurrency
        self.rows = rows
        self.delay_ms = delay_ms
        self._random = random.Random(seed)
        self.server = PrivateServer(directory / "pg")
        self._logs = directory / "executions"
        self._port = _free_port()
        self.url = f"http://127.0.0.1:{self._port}"
        # Every process reaches the database and the file store through a proxy the run
        # controls (partitions, store outages); the checks reach the database directly.
        self.db_proxy = TcpProxy("127.0.0.1", self.server.port)
        self._s3 = S3Server()
        self.s3_proxy = TcpProxy("127.0.0.1", self._s3.port)
        proxied = self.server.url.replace(f":{self.server.port}/", f":{self.db_proxy.port}/")
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
        self._env.update(
            {
                "BULKOPS_DATABASE_URL": proxied,
                "BULKOPS_FILES_URL": f"s3://{self._s3.bucket}/uploads",
                "BULKOPS_S3_ENDPOINT": f"http://127.0.0.1:{self.s3_proxy.port}",
                "BULKOPS_S3_REGION": S3_REGION,
                "BULKOPS_STORAGE_TIMEOUT": str(STORAGE_TIMEOUT),
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": S3_REGION,
                "BULKOPS_OPERATIONS": str(OPERATIONS),
                "BULKOPS_MAX_ROW_CONCURRENCY": str(max_row_concurrency),
                "BULKOPS_ABANDON_AFTER": str(abandon_after),
                "BULKOPS_CHUNK_ROWS": str(chunk_rows),
                "BULKOPS_PENDING_POLL_INTERVAL": "0.5",
                "PYTHONUNBUFFERED": "1",
                **(env or {}),
            }
        )
        self._api: Bulkops | None = None
        self._workers: list[Bulkops] = []
        self._started = 0
        self._operations: dict[str, tuple[str, Path]] = {}  # id -> (name, log)
        self._answers: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._stop_reading = threading.Event()
        self._db_down = threading.Event()

    # -- processes -------------------------------------------------------------------
    def _spawn(self, *args: str) -> Bulkops:
        self._started += 1
        log = self.directory / f"process-{self._started}-{args[0]}.log"
        return Bulkops(list(args), self._env, log)

    def _start_worker(self) -> Bulkops:
        worker = self._spawn("worker")
        self._workers.append(worker)
        return worker

    def _start_api(self) -> None:
        self._api = self._spawn("serve", "--role", "api", "--port", str(self._port))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self._api.popen.poll() is not None:
                raise ChaosError(f"the API process exited: {self._api.log.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/health/live", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise ChaosError("the API process did not answer")

    # -- requests --------------------------------------------------------------------
    def _answer(self, response: httpx.Response) -> httpx.Response:
        with self._lock:
            self._answers[response.status_code] += 1
        return response

    def _submit(self, index: int) -> None:
        name = CHAOS_PIPELINE if index % 2 else CHAOS_ROWS
        delay = self.delay_ms // 2 if name == CHAOS_PIPELINE else self.delay_ms
        log = self._logs / f"operation-{index}.log"
        content = "n\n" + "".join(f"{n}\n" for n in range(1, self.rows + 1))
        deadline = time.monotonic() + 60
        while True:
            try:
                response = self._answer(
                    httpx.post(
                        f"{self.url}/api/bulks",
                        data={
                            "operationName": name,
                            "metadata": json.dumps({"log": str(log), "delayMs": delay}),
                        },
                        files={"file": ("rows.csv", content.encode(), "text/csv")},
                        timeout=30,
                    )
                )
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code == 201:
                self._operations[str(response.json()["operationId"])] = (name, log)
                return
            if response is not None and response.status_code != 503:
                raise ChaosError(f"create answered {response.status_code}: {response.text}")
            if time.monotonic() > deadline:
                raise ChaosError("could not create an operation for 60 s")
            time.sleep(0.2)

    def _read(self) -> None:
        """A reader that polls status and the list, as a dashboard would, meanwhile."""
        with httpx.Client(timeout=10) as client:
            while not self._stop_reading.wait(0.2):
                for operation_id in list(self._operations):
                    with contextlib.suppress(httpx.TransportError):
                        self._answer(client.get(f"{self.url}/api/bulks/{operation_id}/status"))
                with contextlib.suppress(httpx.TransportError):
                    self._answer(client.get(f"{self.url}/api/bulks", params={"pageSize": 10}))

    # -- faults ----------------------------------------------------------------------
    def _supervise(self) -> None:
        """Start a worker again that exited on its own (as a process supervisor would:
        a worker that starts while the database is down stops with an error)."""
        for worker in list(self._workers):
            if worker.popen.poll() is not None:
                worker.stop()  # closes its log
                self._workers.remove(worker)
                self._start_worker()

    def _fault(self, kind: str) -> Fault:
        fault = Fault(kind, time.time())
        self._supervise()
        if kind == "kill":
            alive = [w for w in self._workers if w.popen.poll() is None]
            victim = self._random.choice(alive)
            victim.kill()
            self._workers.remove(victim)
            fault.victim = victim.popen.pid
            self._start_worker()
            fault.detail = f"worker pid {victim.popen.pid}"
        elif kind == "terminate":
            fault.detail = f"{self.server.terminate_clients()} connections"
        elif kind == "partition":
            silent = self._random.uniform(2.0, 6.0)
            self.db_proxy.blackhole()
            time.sleep(silent)
            self.db_proxy.heal()
            fault.detail = f"silent {silent:.1f} s"
        elif kind == "store":
            down = self._random.uniform(2.0, 6.0)
            how = self._random.choice(("refuse", "503"))
            if how == "refuse":
                self.s3_proxy.stop()
            else:
                self.s3_proxy.answer(503)
            time.sleep(down)
            if how == "refuse":
                self.s3_proxy.start()
            else:
                self.s3_proxy.heal()
            fault.detail = f"S3 {how} {down:.1f} s"
        else:
            down = self._random.uniform(1.0, 5.0)
            self._db_down.set()
            self.server.stop()
            time.sleep(down)
            self.server.start()
            self._db_down.clear()
            fault.detail = f"down {down:.1f} s"
        fault.end = time.time()
        return fault

    def _kinds(self) -> Iterator[str]:
        while True:
            round_ = list(self.kinds)
            self._random.shuffle(round_)
            yield from round_

    # -- the run ---------------------------------------------------------------------
    def run(self) -> Outcome:
        """Start everything, submit and fault for ``seconds``, wait for the end, check."""
        self._logs.mkdir(parents=True, exist_ok=True)
        self.server.create()
        self._s3.start()
        self.db_proxy.start()
        self.s3_proxy.start()
        began = time.monotonic()
        reader = threading.Thread(target=self._read, daemon=True)
        faults: list[Fault] = []
        try:
            self._start_api()
            for _ in range(self.workers):
                self._start_worker()
            reader.start()
            index = 0
            kinds = self._kinds()
            end = time.monotonic() + self.seconds
            next_submit = time.monotonic()
            next_fault = time.monotonic() + self._random.uniform(1.5, 4.0)
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= next_submit:
                    self._submit(index)
                    index += 1
                    next_submit = now + 2.0
                if now >= next_fault:
                    faults.append(self._fault(next(kinds)))
                    next_fault = time.monotonic() + self._random.uniform(1.5, 4.0)
                self._supervise()
                time.sleep(0.05)
            self._wait_final(deadline=time.monotonic() + 180)
            self._stop_reading.set()
            reader.join(timeout=30)
            outcome = self._check(faults)
            outcome.seconds = time.monotonic() - began
            return outcome
        finally:
            self._stop_reading.set()
            for worker in self._workers:
                worker.stop()
            if self._api is not None:
                self._api.stop()
            self.db_proxy.stop()
            self.s3_proxy.stop()
            self._s3.stop()
            self.server.stop("immediate")

    def _status(self, operation_id: str) -> dict[str, Any] | None:
        try:
            response = self._answer(
                httpx.get(f"{self.url}/api/bulks/{operation_id}/status", timeout=10)
            )
        except httpx.TransportError:
            return None
        return dict(response.json()) if response.status_code == 200 else None

    def _wait_final(self, deadline: float) -> None:
        waiting = set(self._operations)
        while waiting:
            self._supervise()
            for operation_id in list(waiting):
                status = self._status(operation_id)
                if status is not None and status["status"] in FINAL:
                    waiting.discard(operation_id)
            if time.monotonic() > deadline:
                raise ChaosError(f"operations not final after the run: {sorted(waiting)}")
            time.sleep(0.2)

    def _check(self, faults: list[Fault]) -> Outcome:
        executions = 0
        repeats: list[tuple[float, int, float]] = []  # (ended, pid, ran again at) per repeat
        for operation_id, (name, log) in self._operations.items():
            steps = (1, 2) if name == CHAOS_PIPELINE else (0,)
            runs: dict[tuple[int, int], list[tuple[float, int]]] = {}
            for line in log.read_text().splitlines() if log.exists() else []:
                row, step, ran_by, at = line.split()
                runs.setdefault((int(row), int(step)), []).append((float(at), int(ran_by)))
            expected = {(row, step) for row in range(1, self.rows + 1) for step in steps}
            missing = expected - set(runs)
            if missing:
                raise ChaosError(f"{operation_id}: {len(missing)} (row, step) never ran")
            for times in runs.values():
                executions += len(times)
                times.sort()
                repeats.extend(
                    (ended, pid, again) for (ended, pid), (again, _) in itertools.pairwise(times)
                )
            self._check_operation(operation_id)
        outcome = Outcome(
            seed=self.seed,
            workers=self.workers,
            max_row_concurrency=self.max_row_concurrency,
            operations=len(self._operations),
            rows=len(self._operations) * self.rows,
            executions=executions,
            faults=faults,
            repeats=len(repeats),
            answers=self._answers,
        )
        for ended, pid, again in repeats:
            culprit = blame(faults, ended, pid, again)
            if culprit is None:
                outcome.unexplained += 1
            else:
                culprit.repeats += 1
        if self._answers.get(500):
            raise ChaosError(f"{self._answers[500]} answers 500")
        if outcome.repeats > outcome.bound * max(1, len(faults)):
            raise ChaosError(f"{outcome.repeats} repeats for {len(faults)} faults: {outcome}")
        return outcome

    def _check_operation(self, operation_id: str) -> None:
        status = self._status(operation_id)
        if status is None:
            raise ChaosError(f"{operation_id}: no status")
        if status["status"] != "Completed" or status["processedRows"] != self.rows:
            raise ChaosError(f"{operation_id}: ended {status}")
        with psycopg.connect(self.server.url, connect_timeout=10) as conn:
            stored = conn.execute(_STORED_ROWS, {"id": operation_id}).fetchone()
            counters = conn.execute(
                "SELECT processed_rows, successful_rows, error_count FROM operations WHERE id = %s",
                (operation_id,),
            ).fetchone()
            events = conn.execute(
                "SELECT type, sequence FROM events WHERE operation_id = %s", (operation_id,)
            ).fetchall()
        assert stored is not None and counters is not None
        if (stored[0], stored[1], 0) != tuple(counters) or stored[0] != self.rows:
            raise ChaosError(f"{operation_id}: counters {counters}, stored rows {stored}")
        kinds = Counter(kind for kind, _ in events)
        if kinds["Created"] != 1 or kinds["Completed"] != 1:
            raise ChaosError(f"{operation_id}: events {dict(kinds)}")
        sequences = [sequence for _, sequence in events]
        if len(sequences) != len(set(sequences)):
            raise ChaosError(f"{operation_id}: duplicate event sequences")


def run_chaos(seed: int, seconds: float, **options: Any) -> Outcome:
    """One chaos run in a fresh temporary directory (removed afterwards)."""
    directory = Path(tempfile.mkdtemp(prefix=f"bulkops-chaos-{seed}-"))
    os.chmod(directory, 0o755)
    try:
        outcome = Chaos(directory, seed=seed, seconds=seconds, **options).run()
    except BaseException:
        print(f"chaos run {seed} failed; its logs are kept in {directory}", file=sys.stderr)
        raise
    if not os.environ.get("CHAOS_KEEP_LOGS"):
        shutil.rmtree(directory, ignore_errors=True)
    return outcome


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.chaos``: several seeded runs; exit 1 when one fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="faults for this long")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rows", type=int, default=3000, help="rows per operation")
    args = parser.parse_args(argv)
    failed = 0
    totals: Counter[str] = Counter()
    for seed in (int(s) for s in args.seeds.split(",")):
        try:
            outcome = run_chaos(seed, args.seconds, workers=args.workers, rows=args.rows)
        except ChaosError as exc:
            print(f"seed {seed}: FAIL {exc}")
            failed += 1
            continue
        print(json.dumps(outcome.summary()))
        totals.update(fault.kind for fault in outcome.faults)
        over = [fault for fault in outcome.faults if fault.repeats > outcome.bound]
        if over:
            print(f"seed {seed}: FAIL faults over {outcome.bound} repeats: {over}")
            failed += 1
    short = [kind for kind in KINDS if totals[kind] < 2]
    if short:
        print(f"fault kinds seen fewer than twice: {short}")
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
