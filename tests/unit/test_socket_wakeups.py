"""Wake-ups between processes of one host through Unix datagram sockets."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
from pathlib import Path

import pytest

from bulkops.storage.wakeups import SocketWakeUps


@pytest.fixture
def directory() -> Path:
    # Short: a Unix socket's path is limited to about 100 bytes.
    return Path(tempfile.mkdtemp(prefix="bo-w-"))


async def _until(predicate: object, what: str) -> None:
    async with asyncio.timeout(5):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.005)


async def test_work_and_signals_reach_every_other_listener(directory: Path) -> None:
    heard: dict[str, list[str]] = {"a": [], "b": []}
    ends = {name: SocketWakeUps(directory) for name in heard}
    tasks = [
        asyncio.create_task(end.listen(lambda n=name: heard[n].append("work"), heard[name].append))
        for name, end in ends.items()
    ]
    try:
        await _until(lambda: all(heard.values()), "both to listen")  # each looks once
        await _until(lambda: len(list(directory.glob("*.sock"))) == 2, "two sockets")
        await ends["a"].announce_signal("op:key")
        await ends["a"].announce_work()
        await _until(lambda: heard["b"][-2:] == ["op:key", "work"], "b to hear a")
        assert heard["a"] == ["work"]  # a process does not hear itself
        await SocketWakeUps(directory).announce_signal("from-elsewhere")
        await _until(lambda: "from-elsewhere" in heard["a"], "a to hear an announcer")
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert list(directory.glob("*.sock")) == []  # each listener removed its socket


async def test_a_socket_left_by_a_dead_process_is_removed(directory: Path) -> None:
    left = directory / "1-dead.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(left))
    sock.close()  # bound once, nobody listens any more
    await SocketWakeUps(directory).announce_work()
    assert not left.exists()


async def test_a_missing_directory_is_no_error(directory: Path) -> None:
    await SocketWakeUps(directory / "gone").announce_work()


async def test_a_process_that_starts_listening_later_hears_the_next_announcements(
    directory: Path,
) -> None:
    announcer = SocketWakeUps(directory)
    await announcer.announce_work()  # lists the directory: nobody listens yet
    heard: list[str] = []
    late = SocketWakeUps(directory)
    task = asyncio.create_task(late.listen(lambda: None, heard.append))
    try:
        await _until(lambda: len(list(directory.glob("*.sock"))) == 1, "the late listener")

        async def announced() -> bool:
            await announcer.announce_signal("op:late")
            return "op:late" in heard

        # Heard at once when its socket changed the directory's time, else once the
        # announcer lists the directory again (RELIST): within the deadline either way.
        async with asyncio.timeout(5):
            while not await announced():
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_signals_of_one_turn_go_in_one_datagram_and_are_heard_in_order(
    directory: Path,
) -> None:
    heard: list[str] = []
    listener = asyncio.create_task(SocketWakeUps(directory).listen(lambda: None, heard.append))
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    raw.bind(str(directory / "0-raw.sock"))
    raw.setblocking(False)
    try:
        await _until(lambda: len(list(directory.glob("*.sock"))) == 2, "two sockets")
        announcer = SocketWakeUps(directory)
        keys = [f"op:row-{n}" for n in range(50)]
        for key in keys:  # one turn of the event loop: no announcement yields
            await announcer.announce_signal(key)
        await announcer.announce_signal("op:next")  # still the same turn
        await _until(lambda: heard == [*keys, "op:next"], "every key, in order")
        datagram = raw.recv(1 << 16)
        assert datagram.startswith(b"S") and datagram.count(b"\0") == 51
        with pytest.raises(BlockingIOError):
            raw.recv(1 << 16)  # nothing more was sent
        await announcer.announce_signal("op:alone")  # a later turn, a key of its own
        await _until(lambda: heard[-1] == "op:alone", "the key alone")
        assert raw.recv(1 << 16) == b"sop:alone"
    finally:
        raw.close()
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
