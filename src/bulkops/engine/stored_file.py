"""An operation's stored file, opened the way a database call is made: while the file
store is unreachable (or its disk full) processing waits for it, then goes on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bulkops.engine.persistence import StorageRetry
from bulkops.storage.ports import FileStore


@asynccontextmanager
async def stored_file(files: FileStore, file_id: str, timeout: float) -> AsyncIterator[Path]:
    """``files.local_path(file_id)``, tried again with backoff for up to ``timeout`` seconds
    while the store is unavailable (``StorageUnavailable``): the rows wait for the store as
    they wait for the database, and start within a backoff of it coming back.

    An outage of the file store is not one of the database: it is counted apart, so that
    it never excuses a holder's late heartbeats.
    """
    async with contextlib.AsyncExitStack() as stack:

        async def enter() -> Path:
            return await stack.enter_async_context(files.local_path(file_id))

        yield await StorageRetry(timeout).call(enter)
