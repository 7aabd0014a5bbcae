"""Clients that send too much or too slowly, against a real ``bulkops serve`` and a real
``bulkops gateway`` over raw sockets: oversized headers are answered 431, slow headers and
slow or stalled bodies are cut off (408), and well-behaved clients are served as before."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Spawner, free_port, serve, wait_ready

LIMITS = {
    "max_header_bytes": "32768",
    "header_timeout": "1",
    "body_timeout": "1",
    "body_min_rate": "2000",
}
GIVE_UP = 30.0  # seconds a bad client keeps at it before the test calls the server lax


pytestmark = pytest.mark.one_core


@pytest.fixture(scope="module", params=["serve", "gateway"])
def url(request: pytest.FixtureRequest, module_spawn: Spawner) -> str:
    """The address of a serve, or of a gateway in front of one of its own, both under LIMITS;
    shared by the module's tests (each leaves the service as it found it)."""
    directory = module_spawn.directory / request.param
    directory.mkdir()
    _, backend = serve(
        module_spawn,
        database_url=f"sqlite:///{directory}/shared.db",
        files_url=f"file://{directory}/files",
        **LIMITS,
    )
    if request.param == "serve":
        return backend
    port = free_port()
    gateway = module_spawn("gateway", "--port", str(port), "--backend", f"a={backend}", **LIMITS)
    address = f"http://127.0.0.1:{port}"
    wait_ready(gateway, address)
    return address


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=GIVE_UP)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def response(data: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def stored(url: str) -> tuple[int, list[str]]:
    """The count and ids of the operations the service holds."""
    listing = httpx.get(f"{url}/api/bulks", timeout=GIVE_UP).json()
    return listing["totalCount"], [item["id"] for item in listing["items"]]


def trickle(sock: socket.socket, parts: Callable[[int], bytes], pause: float) -> bool:
    """Send ``parts(i)`` every ``pause`` seconds until the server closes (True) or GIVE_UP
    seconds pass (False)."""
    deadline = time.monotonic() + GIVE_UP
    i = 0
    while time.monotonic() < deadline:
        try:
            sock.sendall(parts(i))
        except OSError:  # reset or broken pipe: the server closed it
            return True
        sock.settimeout(pause)
        try:
            sock.recv(1, socket.MSG_PEEK)  # returns once the server answers or closes
        except TimeoutError:
            i += 1
            continue
        except OSError:
            return True
        finally:
            sock.settimeout(GIVE_UP)
        return True
    return False


def test_oversized_headers_are_431_and_normal_ones_pass(url: str) -> None:
    big = httpx.get(f"{url}/health/live", headers={"x-filler": "a" * 200_000}, timeout=GIVE_UP)
    assert big.status_code == 431
    assert "32768 bytes" in big.json()["error"]
    many = httpx.get(
        f"{url}/health/live",
        headers={f"x-h{i}": "b" * 100 for i in range(400)},  # 40 KB in small fields
        timeout=GIVE_UP,
    )
    assert many.status_code == 431
    fine = httpx.get(f"{url}/health/live", headers={"x-filler": "c" * 16_000}, timeout=GIVE_UP)
    assert fine.status_code == 200


def test_headers_sent_slowly_are_cut_off_with_408(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: bulkops\r\n")
        cut = trickle(sock, lambda i: b"X-Slow-%d: 1\r\n" % i, pause=0.2)
        assert cut, f"a client sending a header line every 0.2 s was served for {GIVE_UP} s"
        status, body = response(read_all(sock))
    assert status == 408
    assert "headers" in body["error"]


def test_a_connection_that_sends_nothing_is_closed(url: str) -> None:
    with connect(url) as sock:
        started = time.monotonic()
        assert read_all(sock) == b""  # closed by the server, nothing said
        assert time.monotonic() - started < GIVE_UP


@pytest.mark.parametrize("kind", ["trickling", "stalled"])
def test_a_slow_body_is_cut_off_and_nothing_is_stored(url: str, kind: str) -> None:
    boundary = "b0undary"
    head = (
        "POST /api/bulks HTTP/1.1\r\nHost: bulkops\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        "Content-Length: 1000000\r\n\r\n"
        f'--{boundary}\r\nContent-Disposition: form-data; name="operationName"\r\n\r\n'
        f"import-users\r\n--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="rows.csv"\r\n'
        "Content-Type: text/csv\r\n\r\nname,email\r\n"
    ).encode()
    before = stored(url)
    with connect(url) as sock:
        sock.sendall(head)
        if kind == "trickling":  # 100 bytes every 0.2 s: 500 bytes/s, under the minimum
            cut = trickle(sock, lambda i: b"Ada,ada%05d@example.com\n" * 4, pause=0.2)
        else:  # nothing more after the first part
            cut = trickle(sock, lambda i: b"", pause=0.2)
        assert cut, f"a {kind} body was read for {GIVE_UP} s"
        status, body = response(read_all(sock))
    assert status == 408
    assert "request body" in body["error"]
    assert stored(url) == before


def test_a_body_sent_steadily_is_served(url: str) -> None:
    boundary = "b0undary"
    rows = b"name,email\n" + b"".join(b"U%d,u%d@example.com\n" % (i, i) for i in range(6000))
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="operationName"\r\n\r\n'
            f'import-users\r\n--{boundary}\r\nContent-Disposition: form-data; name="metadata"'
            f'\r\n\r\n{{"requestedBy": "e2e"}}\r\n--{boundary}\r\n'
            'Content-Disposition: form-data; name="file"; filename="rows.csv"\r\n'
            "Content-Type: text/csv\r\n\r\n"
        ).encode()
        + rows
        + f"\r\n--{boundary}--\r\n".encode()
    )

    def steadily() -> Iterator[bytes]:
        for start in range(0, len(body), 8192):  # 8 KB every 0.1 s, for over a second
            yield body[start : start + 8192]
            time.sleep(0.1)

    created = httpx.post(
        f"{url}/api/bulks",
        content=steadily(),
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        timeout=GIVE_UP,
    )
    assert created.status_code == 201, created.text
