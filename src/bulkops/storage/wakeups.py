"""Wake-ups where the database cannot carry them (SQLite, memory).

``NoWakeUps``: none, polling serves. ``SocketWakeUps``: the processes of one host that
share a directory (``serve`` and its worker processes) tell each other through Unix
datagram sockets in it, one socket per listening process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("bulkops.storage")

WORK = b"w"
SIGNAL = b"s"
SUFFIX = ".sock"
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
    ``directory``: an announcement is one datagram to every socket there.

    Best effort like every ``WakeUps``: a notice to a process whose socket buffer is full
    is dropped (its pollers find the work). A socket left by a process that died refuses
    the datagram and is removed.
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._own: Path | None = None  # the socket this process listens on

    async def announce_work(self) -> None:
        """A datagram ``w`` to every listening process."""
        self._send(WORK)

    async def announce_signal(self, key: str) -> None:
        """A datagram ``s<key>`` to every listening process."""
        message = SIGNAL + key.encode()
        if len(message) <= _MAX_MESSAGE:
            self._send(message)

    def _send(self, message: bytes) -> None:
        try:
            names = os.listdir(self._directory)
        except OSError:
            return  # the directory is gone: the service is stopping
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            self._send_to(sender, names, message)

    def _send_to(self, sender: socket.socket, names: list[str], message: bytes) -> None:
        for name in names:
            if not name.endswith(SUFFIX):
                continue
            path = self._directory / name
            if path == self._own:
                continue
            try:
                sender.sendto(message, str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    path.unlink()  # nobody listens there any more
            except OSError:
                continue  # a full buffer: that process's pollers will find it

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
