"""A webhook delivery pending when its process is killed is sent after the restart: the
outbox keeps it."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from tests.e2e.conftest import Process, free_port, serve, wait_for, wait_terminal


class _Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        _Hook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def receiver(port: int) -> Iterator[Callable[[], None]]:
    """``start()`` begins answering on ``port`` (nothing listens there before)."""
    servers: list[ThreadingHTTPServer] = []
    _Hook.received = []

    def start() -> None:
        server = ThreadingHTTPServer(("127.0.0.1", port), _Hook)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_pending_delivery_survives_a_crash(
    spawn: Callable[..., Process], tmp_path: Path, port: int, receiver: Callable[[], None]
) -> None:
    process, url = serve(spawn)
    hook = f"http://127.0.0.1:{port}/hook"
    options = {"recipients": [{"channel": "webhook", "target": hook, "triggers": ["OnCompletion"]}]}
    created = httpx.post(
        f"{url}/api/bulks",
        data={
            "operationName": "import-users",
            "metadata": json.dumps({"requestedBy": "me"}),
            "notifications": json.dumps(options),
        },
        files={"file": ("u.csv", b"name,email\nAda,ada@example.com\n", "text/csv")},
    )
    assert created.status_code == 201, created.text
    operation_id = created.json()["operationId"]
    wait_terminal(url, operation_id)

    def tried() -> bool:
        found = httpx.get(f"{url}/api/bulks/{operation_id}/notifications").json()
        return bool(found) and found[0]["attempts"] >= 1 and found[0]["state"] == "Pending"

    wait_for(tried, what="a failed first attempt (nothing listens yet)")
    process.signal(signal.SIGKILL)
    process.wait()
    receiver()

    _, url = serve(spawn)

    def delivered() -> bool:
        found = httpx.get(f"{url}/api/bulks/{operation_id}/notifications").json()
        return found[0]["state"] == "Delivered"

    wait_for(delivered, timeout=60, what="the delivery after the restart")
    assert len(_Hook.received) == 1
    assert _Hook.received[0]["event"] == "Completed"
    assert _Hook.received[0]["operation"]["id"] == operation_id  # type: ignore[index]
