"""Tools that break things on purpose: a TCP proxy a test can cut, and a SQLite lock held
from another process, and readers of what the processes stored."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter
from pathlib import Path


class TcpProxy:
    """Forwards a loopback port to ``target``; ``stop()`` cuts every connection and refuses
    new ones (the database looks down), ``start()`` brings it back on the same port.

    Other faults, each ended by ``heal()``:
    - ``blackhole()``: a silent partition. Connections stay open and new ones are accepted,
      but no byte goes either way (nothing is closed or reset); on ``heal()`` what was held
      back flows again, as TCP retransmits it after a partition.
    - ``answer(status)``: every new connection is answered with that HTTP status (an S3
      endpoint answering 503) and closed; open ones are cut.
    - ``slow(delay)``: each piece of data waits ``delay`` seconds before it is forwarded.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = int(probe.getsockname()[1])
        probe.close()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._upstreams: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._status: int | None = None
        self._delay = 0.0

    def blackhole(self, *, server_gives_up: float | None = None) -> None:
        """Stop forwarding, closing nothing on the client's side. With ``server_gives_up``,
        the connections to the target are closed that many seconds later, as a server's
        TCP keepalives end the sessions of a client gone silent (a proxy's kernel would
        answer the probes itself)."""
        self._flowing.clear()
        if server_gives_up is not None:
            timer = threading.Timer(server_gives_up, self._cut_upstreams)
            timer.daemon = True
            timer.start()

    def _cut_upstreams(self) -> None:
        if self._flowing.is_set():
            return  # healed meanwhile
        with self._lock:
            upstreams, self._upstreams = self._upstreams, set()
        for sock in upstreams:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def answer(self, status: int) -> None:
        """Answer every new connection with HTTP ``status``; cut the open ones."""
        self._status = status
        self._cut_all()

    def slow(self, delay: float) -> None:
        """Delay every forwarded piece of data by ``delay`` seconds."""
        self._delay = delay

    def heal(self) -> None:
        """End ``blackhole``, ``answer`` and ``slow``: forward as before."""
        self._status, self._delay = None, 0.0
        self._flowing.set()

    def _cut_all(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def start(self) -> None:
        """Listen and forward."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Close the listener and every forwarded connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._cut_all()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            if self._status is not None:
                threading.Thread(
                    target=self._answer, args=(client, self._status), daemon=True
                ).start()
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            # Forwarded at once, as by the database's own sockets and real proxies: with
            # Nagle's algorithm a small write waited for the peer's delayed ACK (about 40 ms)
            # and every round trip through the proxy took 40-100 ms.
            for end in (client, upstream):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.update((client, upstream))
                self._upstreams.add(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _answer(client: socket.socket, status: int) -> None:
        """Read a request's head and answer ``status`` with an empty body, then close."""
        try:
            client.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head:
                data = client.recv(65536)
                if not data:
                    break
                head += data
            client.sendall(
                b"HTTP/1.1 %d Fault\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % status
            )
        except OSError:
            pass
        finally:
            client.close()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                self._flowing.wait()
                data = source.recv(65536)
                if not data:
                    break
                if self._delay:
                    time.sleep(self._delay)
                self._flowing.wait()  # read before a partition began: held back too
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def runs(log: Path) -> Counter[str]:
    """How many times each row name was processed (the side-effect log of slow-log)."""
    return Counter(log.read_text().split()) if log.exists() else Counter()
