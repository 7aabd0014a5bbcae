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


def _handler(state: SourceServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            state.requests.append((self.headers.get("Host", ""), self.path))
            path = self.path.split("?", 1)[0]
            if path in state.files:
                self._send(200, state.files[path])
            elif path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/error":
                self._send(503, b"the export service is down")
            elif path == "/declared-huge.csv":
                self.send_response(200)
                self.send_header("Content-Length", str(10**12))
                self.end_headers()
                self.wfile.write(b"name,email\n")
            elif path == "/stalls.csv":
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b"name,email\n")
                self.wfile.flush()
                state.release.wait(30)
            elif path == "/endless.csv":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                line = b"name,email\n" + b"x,x@example.com\n" * 4000
                try:
                    while not state.release.is_set():
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                except OSError:
                    pass  # the reader went away, as it should
            else:
                self._send(404, b"no such file")

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def source_server() -> Iterator[SourceServer]:
    """Serve on a free loopback port while the context lasts."""
    state = SourceServer(base="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
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
