"""Time limits on PostgreSQL connections, so that a partition that drops packets without
a reset (a dead NAT, a security group change, a failover that leaves half-open
connections) is noticed within ``BULKOPS_STORAGE_TIMEOUT`` instead of never.

Three layers, each for what the others miss:
- libpq's ``connect_timeout`` bounds a connection attempt (SYN and start-up alike);
- TCP keepalives and ``tcp_user_timeout``, on both ends of the connection (the server's
  through ``options``), make the kernel drop a connection whose peer went silent, idle or
  not: the server then ends the session and frees its locks (a partitioned worker's
  liveness lock among them, so its work is resumed elsewhere);
- a time limit on each transaction in the process (``Database``), for what the kernel
  cannot see: a peer whose TCP stack still answers while nothing comes back (a hung
  proxy, a stuck server).

SQLite is a local file: no partition can cut it off, and these limits do not apply (its
busy timeout bounds the wait for another process's lock).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


def postgres_connect_args(timeout: float | None) -> dict[str, Any]:
    """libpq connection parameters (psycopg's ``connect`` keywords) for ``timeout`` seconds;
    none when ``timeout`` is unset or 0 (no limit)."""
    if not timeout:
        return {}
    seconds = max(2, math.ceil(timeout))  # libpq takes whole seconds, 2 at least
    idle = max(1, int(timeout / 2))
    interval = max(1, int(timeout / 6))
    user_timeout_ms = int(timeout * 1000)
    server = (
        f"-c tcp_keepalives_idle={idle} -c tcp_keepalives_interval={interval} "
        f"-c tcp_keepalives_count=3 -c tcp_user_timeout={user_timeout_ms}"
    )
    return {
        "connect_timeout": seconds,
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": interval,
        "keepalives_count": 3,
        "tcp_user_timeout": user_timeout_ms,
        "options": server,
    }


# How long a cancelled statement may spend on its driver's clean-up (psycopg asks the
# server to cancel it and waits for the answer, 10 s in all) before it is cancelled again,
# which makes the driver close the connection at once.
CLEANUP_GRACE = 0.5


@asynccontextmanager
async def time_limit(seconds: float) -> AsyncIterator[None]:
    """Raise ``TimeoutError`` when the block takes longer than ``seconds``, without waiting
    on the driver's clean-up of the statement cut off (a silent peer answers that no more
    than it answered the statement): the block is cancelled at the limit and, if still
    running, again ``CLEANUP_GRACE`` later."""
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - always called from a task
        yield
        return
    loop = asyncio.get_running_loop()
    again: asyncio.TimerHandle | None = None
    recancelled = False

    def cancel_again() -> None:
        nonlocal recancelled
        recancelled = True
        task.cancel()

    def schedule_again() -> None:
        nonlocal again
        again = loop.call_later(CLEANUP_GRACE, cancel_again)

    async with asyncio.timeout(seconds):
        first = loop.call_later(seconds, schedule_again)  # just after the timeout's cancel
        try:
            yield
        except asyncio.CancelledError:
            if recancelled:
                task.uncancel()  # ours: the timeout turns its own into TimeoutError
            raise
        finally:
            first.cancel()
            if again is not None:
                again.cancel()
