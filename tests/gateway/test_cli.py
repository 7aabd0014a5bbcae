"""``bulkops gateway`` as a real process in front of real ``bulkops serve`` processes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Process, free_port, wait_ready
from tests.gateway import gateway_operations as gops

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 180  # seconds: process start-up on a busy machine

Spawn = Callable[..., tuple[Process, str]]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Returns ``spawn(command, name, operations=None, **env) -> (process, url)``."""
    started: list[Process] = []

    def start(
        command: list[str], name: str, operations: Sequence[type] = (), **settings: str
    ) -> tuple[Process, str]:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("BULKOPS_")}
        env.update({f"BULKOPS_{k.upper()}": v for k, v in settings.items()})
        env.update(
            {
                "BULKOPS_PORT": str(port),
                "BULKOPS_DATABASE_URL": f"sqlite:///{tmp_path}/{name}.sqlite",
                "BULKOPS_FILES_URL": f"file://{tmp_path}/files-{name}",
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if operations:
            modules = tmp_path / f"{name}_operations.py"
            modules.write_text(
                "".join(f"from {c.__module__} import {c.__qualname__}\n" for c in operations)
            )
            env["BULKOPS_OPERATIONS"] = str(modules)
        process = Process(command, env, tmp_path / f"{name}.log")
        started.append(process)
        return process, f"http://127.0.0.1:{port}"

    yield start
    for process in reversed(started):
        process.stop()


def test_the_gateway_command_serves_every_backend(spawn: Spawn) -> None:
    a, a_url = spawn(["serve"], "a", gops.SERVED["a"])
    c, c_url = spawn(["serve"], "c", gops.SERVED["c"])
    gateway, url = spawn(
        ["gateway", "--backend", f"a={a_url}", "--backend", f"c={c_url}"],
        "gateway",
        gateway_fan_out_timeout_per_backend="5",
    )
    for process, address in ((a, a_url), (c, c_url)):
        wait_ready(process, address, READY_TIMEOUT)
    wait_ready(gateway, url, READY_TIMEOUT)
    with httpx.Client(base_url=url, timeout=30) as client:
        names = {d["name"]: d["sourceService"] for d in client.get("/api/operations").json()}
        assert names == {"alpha-import": "a", "gamma-import": "c"}
        created = client.post(
            "/api/bulks",
            data={"operationName": "gamma-import", "metadata": "{}"},
            files={"file": ("rows.csv", b"name\nx\nfail-y\n", "text/csv")},
        )
        assert created.status_code == 201, created.text
        operation_id = created.json()["operationId"]
        deadline = time.monotonic() + 60
        while client.get(f"/api/bulks/{operation_id}/status").json()["status"] != (
            "CompletedWithErrors"
        ):
            assert time.monotonic() < deadline, "the operation did not finish"
            time.sleep(0.05)
        listing = client.get("/api/bulks").json()
        assert [i["id"] for i in listing["items"]] == [operation_id]
        ready = client.get("/health/ready")
        assert ready.status_code == 200 and ready.json()["status"] == "Healthy"
    a.stop()
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/health/ready").json()["status"] == "Degraded"


def test_duplicate_operation_names_stop_the_command(spawn: Spawn) -> None:
    a, a_url = spawn(["serve"], "a", gops.SERVED["a"])
    twin, twin_url = spawn(["serve"], "twin", [gops.AlphaImport, gops.GammaImport])
    wait_ready(a, a_url, READY_TIMEOUT)
    wait_ready(twin, twin_url, READY_TIMEOUT)
    gateway, _ = spawn(["gateway"], "gateway", gateway_backends=f"a={a_url},twin={twin_url}")
    assert gateway.wait(timeout=READY_TIMEOUT) != 0
    output = gateway.output()
    assert "The gateway cannot start" in output
    assert "Operation 'alpha-import' is served by backends 'a' and 'twin'" in output
