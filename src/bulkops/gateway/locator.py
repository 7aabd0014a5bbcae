"""Which backend owns an operation id: the cache first, else ask every backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bulkops.errors import NotFound
from bulkops.gateway.backend import Backend
from bulkops.gateway.errors import BackendUnavailable, Refusal, RelayedRefusal
from bulkops.gateway.fanout import first_match
from bulkops.gateway.idcache import IdCache

Params = Sequence[tuple[str, str]]


class OwnerLocator:
    """Finds the backend of an operation id.

    A cached owner is used at once (and its expiry slides). On a miss every backend is asked
    for the operation's status at the same time; the first to answer 200 is the owner, is
    cached, and the other calls are cancelled.

    Args:
        backends: Every configured backend.
        cache: The operation-to-backend cache.
        timeout: Seconds each backend gets to answer.
    """

    def __init__(self, backends: Sequence[Backend], cache: IdCache, timeout: float) -> None:
        self._backends = list(backends)
        self._by_name = {b.name: b for b in backends}
        self._cache = cache
        self._timeout = timeout

    async def owner(self, operation_id: str, headers: Params) -> Backend:
        """The backend that has ``operation_id`` (a canonical GUID).

        Raises:
            NotFound: every backend answered that it does not know the operation.
            RelayedRefusal: no backend has it and one refused the caller (e.g. 401).
            BackendUnavailable: no backend has it, but some could not be asked.
        """
        cached = self._cache.get(operation_id)
        if cached is not None and cached in self._by_name:
            return self._by_name[cached]
        target = f"/api/bulks/{operation_id}/status"

        async def probe(backend: Backend) -> tuple[int, Any]:
            return await backend.get_json(target, headers=headers)

        winner, answers = await first_match(
            self._backends, probe, self._timeout, accept=lambda answer: answer[0] == 200
        )
        if winner is not None:
            self._cache.put(operation_id, winner.backend.name)
            return winner.backend
        for answer in answers:
            if answer.value is not None and answer.value[0] != 404:
                raise RelayedRefusal(Refusal(*answer.value))
        missing = sorted(a.backend.name for a in answers if not a.ok)
        if missing:
            raise BackendUnavailable(
                f"Operation {operation_id} was not found on the backends that answered; "
                f"unavailable: {', '.join(missing)}"
            )
        raise NotFound(f"Operation {operation_id} not found")
