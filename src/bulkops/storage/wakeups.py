"""Wake-ups where the database cannot carry them (SQLite, memory).

``NoWakeUps``: none, polling serves. ``SocketWakeUps``: the processes of one host that
share a directory (``serve`` and its worker processes) tell each other through Unix
datagram sockets in it, one socket per listening process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("bulkops.storage")

WORK = b"w"
SIGNAL = b"s"  # one signal key follows
SIGNALS = b"S"  # signal keys follow, each ended by a NUL byte
SUFFIX = ".sock"
RELIST = 1.0  # seconds an announcement trusts the sockets it listed last
_MAX_MESSAGE = 64 * 1024  # a signal key is far shorter; a longer one is left to the pollers


class NoWakeUps:
    """A ``WakeUps`` that never announces or hears anything."""

    async def announce_work(self) -> None:
        """Nothing to do."""

    async def announce_signal(self, key: str) -> None:
        """Nothing to do."""

    async def listen(self, on_work: Callable[[], None], on_signal: Callable[[str], None]) -> None:
        """Return at once: there is nothing to listen to."""


class SocketWakeUps:
    """``WakeUps`` between the processes of one host through Unix datagram sockets in
    ``directory``: an announcement is one datagram to every socket there. The signals
    announced within one turn of the event loop go in one datagram.

    Best effort like every ``WakeUps``: a notice to a process whose socket buffer is full
    is dropped (its pollers find the work). A socket left by a process that died refuses
    the datagram and is removed.
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._own: Path | None = None  # the socket this process listens on
        # The listening sockets as last listed, with the directory's change time and the
        # clock then: they are listed again once a process came or went, or after
        # ``RELIST`` seconds (a change within the tick of the listing leaves the time as
        # it was).
        self._listed: tuple[int, float, list[str]] = (-1, -math.inf, [])
        self._keys: list[bytes] = []  # signal keys announced in this turn of the loop

    async def announce_work(self) -> None:
        """A datagram ``w`` to every listening process (after the signals announced
        before it)."""
        self._send_signals()
        self._send(WORK)

    async def announce_signal(self, key: str) -> None:
        """The key to every listening process, at the end of this turn of the event loop:
        one datagram ``s<key>``, or ``S`` and every key announced in the turn, each ended
        by a NUL byte."""
        encoded = key.encode()
        if len(encoded) + 1 >= _MAX_MESSAGE:
            return  # left to the pollers
        if b"\0" in encoded:
            self._send(SIGNAL + encoded)
            return
        self._keys.append(encoded)
        if len(self._keys) == 1:
            asyncio.get_running_loop().call_soon(self._send_signals)

    def _send_signals(self) -> None:
        keys, self._keys = self._keys, []
        if len(keys) == 1:
            self._send(SIGNAL + keys[0])
            return
        batch: list[bytes] = []
        size = len(SIGNALS)
        for key in keys:
            if batch and size + len(key) + 1 > _MAX_MESSAGE:
                self._send(SIGNALS + b"".join(batch))
                batch, size = [], len(SIGNALS)
            batch.append(key + b"\0")
            size += len(key) + 1
        if batch:
            self._send(SIGNALS + b"".join(batch))

    def _send(self, message: bytes) -> None:
        own = str(self._own) if self._own is not None else None
        targets = [path for path in self._targets() if path != own]
        if not targets:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for path in targets:
                try:
                    sender.sendto(message, path)
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(path)  # nobody listens there any more
                except OSError:
                    continue  # a full buffer: that process's pollers will find it

    def _targets(self) -> list[str]:
        """The listening sockets (none when the directory is gone: the service is
        stopping)."""
        changed, listed_at, paths = self._listed
        try:
            now = time.monotonic()
            mtime = os.stat(self._directory).st_mtime_ns
            if mtime != changed or now - listed_at > RELIST:
                names = os.listdir(self._directory)
                paths = [str(self._directory / name) for name in names if name.endswith(SUFFIX)]
                self._listed = (mtime, now, paths)
        except OSError:
            return []
        return paths

    async def listen(self, on_work: Callable[[], None], on_signal: Callable[[str], None]) -> None:
        """Bind this process's socket and call ``on_work`` / ``on_signal`` as datagrams
        arrive, until cancelled (the socket is removed then)."""
        path = self._directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.setblocking(False)
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        loop = asyncio.get_running_loop()

        def readable() -> None:
            while True:
                try:
                    message = receiver.recv(_MAX_MESSAGE)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:
                    log.warning("Wake-up socket failed: %s", exc)
                    return
                if message == WORK:
                    on_work()
                elif message.startswith(SIGNAL):
                    on_signal(message[len(SIGNAL) :].decode(errors="replace"))
                elif message.startswith(SIGNALS):
                    for key in message[len(SIGNALS) : -1].split(b"\0"):
                        on_signal(key.decode(errors="replace"))

        try:
            receiver.bind(str(path))
        except OSError as exc:  # a path too long for a socket, say: the pollers serve
            receiver.close()
            log.warning("No wake-ups through %s: %s", self._directory, exc)
            return
        try:
            self._own = path
            loop.add_reader(receiver.fileno(), readable)
            on_work()  # work announced before this process listened is looked for now
            await asyncio.Event().wait()
        finally:
            with contextlib.suppress(Exception):
                loop.remove_reader(receiver.fileno())
            receiver.close()
            self._own = None
            with contextlib.suppress(OSError):
                path.unlink()
