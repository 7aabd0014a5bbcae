"""How a long-running bulkops process (``serve``, ``worker``, a worker process of
``serve``) tunes its interpreter and picks its event loop."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable

from bulkops.settings import Settings

# How often a thread waiting for the interpreter lock gets it (Python's default: 5 ms). The
# event loop thread is busy with rows for long stretches, while the SQLite threads give the
# lock up around every statement and wait for it again after: a short interval keeps
# requests (a status) and the writer's transactions from queueing behind the rows.
SWITCH_INTERVAL = 0.0001


def settle_memory(settings: Settings) -> None:
    """Move everything start-up created (imported modules, the app) out of the garbage
    collector's sight: full collections otherwise walk it all again and again while rows
    are processed, and stall requests meanwhile. Row processing allocates many
    short-lived containers, so young collections also run less often."""
    if not settings.database_url.startswith("memory://"):
        import bulkops.storage.sql  # noqa: F401 - imported now so it is frozen too
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def settle_interpreter(settings: Settings) -> None:
    """Garbage collection and lock hand-over tuned for a long-running service."""
    settle_memory(settings)
    sys.setswitchinterval(SWITCH_INTERVAL)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (as ``serve`` gets it through uvicorn)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
