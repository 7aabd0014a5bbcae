"""A real HTTP server on loopback that serves source files for ``sourceUrl`` tests: files,
redirects, an error, a body that stalls and one that never ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class SourceServer:
    """The running server: its base URL, the files it serves (path -> bytes), the ``Host``
    headers and paths it was asked for, and an event that releases stalled bodies."""

    base: str
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


class _Server(ThreadingHTTPServer):
    state: SourceServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    @property
    def state(self) -> SourceServer:
        return self.server.state

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.state.requests.append((self.headers.get("Host", ""), self.path))
        path = self.path.split("?", 1)[0]
        if path in self.state.files:
            self._send(200, self.state.files[path])
            return
        if path.startswith("/redirect"):
            path = "/redirect"
        special = {
            "/redirect": self._redirect,
            "/error": lambda: self._send(503, b"the export service is down"),
            "/declared-huge.csv": self._declared_huge,
            "/stalls.csv": self._stalls,
            "/drip.csv": self._drip,
            "/endless.csv": self._endless,
        }
        special.get(path, lambda: self._send(404, b"no such file"))()

    def _redirect(self) -> None:
        self.send_response(302)
        self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _declared_huge(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(10**12))
        self.end_headers()
        self.wfile.write(b"name,email\n")

    def _stalls(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"name,email\n")
        self.wfile.flush()
        self.state.release.wait(30)

    def _chunks(self, chunk: bytes, pause: float) -> None:
        """A chunked body of ``chunk`` again and again until released or dropped."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while not self.state.release.wait(pause):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        except OSError:
            pass  # the reader went away, as it should

    def _drip(self) -> None:
        self._chunks(b"x", 0.05)

    def _endless(self) -> None:
        self._chunks(b"name,email\n" + b"x,x@example.com\n" * 4000, 0)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/csv")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def source_server() -> Iterator[SourceServer]:
    """Serve on a free loopback port while the context lasts."""
    state = SourceServer(base="")
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = state
    server.daemon_threads = True
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
