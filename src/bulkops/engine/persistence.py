"""Storage calls of the engine that ride out an outage, and changes applied with a re-read.

While the database is unreachable (or locked by another process) processing pauses: each
write is retried with exponential backoff and jitter (stamina) until it succeeds or
``timeout`` passes. An outage shorter than that loses nothing and re-runs nothing; after a
longer one the caller gives the operation up, to be resumed once storage is back.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar
from uuid import UUID

import stamina

from bulkops.engine.outages import Outages
from bulkops.errors import StorageUnavailable
from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.ports import OperationStore
from bulkops.storage.records import OperationRecord

log = logging.getLogger("bulkops.engine")

P = ParamSpec("P")
T = TypeVar("T")

_CONFLICT_ATTEMPTS = 5


class StorageRetry:
    """Calls a storage method again while storage is unavailable.

    Args:
        timeout: how long to keep trying, in seconds (0: try once).
        wait_initial: the first pause; it doubles (with jitter) up to ``wait_max``.
        wait_max: the longest pause between two tries.
    """

    def __init__(self, timeout: float, *, wait_initial: float = 0.05, wait_max: float = 2.0):
        self.timeout = timeout
        self._wait_initial = wait_initial
        self._wait_max = wait_max
        self.outages = Outages()  # what every call through it saw of storage

    async def call(self, method: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await method(*args, **kwargs)``, retried on ``StorageUnavailable``."""
        if self.timeout <= 0:
            return await self._once(method, *args, **kwargs)
        tries = 0
        async for attempt in stamina.retry_context(
            on=StorageUnavailable,
            attempts=None,
            timeout=self.timeout,
            wait_initial=self._wait_initial,
            wait_max=self._wait_max,
        ):
            with attempt:
                tries += 1
                try:
                    return await self._once(method, *args, **kwargs)
                except StorageUnavailable as exc:
                    if tries == 1:
                        log.warning(
                            "Storage unavailable (%s); retrying for up to %g s", exc, self.timeout
                        )
                    raise
        raise AssertionError("unreachable: stamina re-raises the last error")  # pragma: no cover

    async def _once(
        self, method: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        began = self.outages.now()
        try:
            result = await method(*args, **kwargs)
        except StorageUnavailable:
            self.outages.failed(began)
            raise
        self.outages.answered(began)
        return result


async def apply_change(
    operations: OperationStore,
    operation_id: UUID,
    compute: Callable[[OperationRecord], OperationChange | None],
    *,
    retry: StorageRetry | None = None,
) -> OperationRecord | None:
    """Read the operation, compute a change from it and apply it; when another writer moved
    the operation in between, read it again and recompute.

    ``compute`` returns None to change nothing, or raises ``IllegalTransition`` when the
    current record forbids the change. Returns the stored record after the change, or None
    when the operation is unknown or nothing was changed.
    """
    calls = retry or StorageRetry(0)
    for _ in range(_CONFLICT_ATTEMPTS):
        current = await calls.call(operations.get, operation_id)
        if current is None:
            return None
        change = compute(current)
        if change is None:
            return None
        stored = await calls.call(operations.apply, change)
        if stored is not None:
            return stored
    log.warning("Operation %s kept changing; gave up applying a change", operation_id)
    return None
