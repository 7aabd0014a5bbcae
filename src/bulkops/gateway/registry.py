"""Which backend serves which operation: discovery of every backend, merged."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bulkops.errors import BulkOpsError
from bulkops.gateway.backend import Backend
from bulkops.gateway.errors import Refusal, RelayedRefusal
from bulkops.gateway.fanout import fan_out

log = logging.getLogger("bulkops.gateway")

DISCOVERY_PATH = "/api/operations"
# An unknown operation name triggers a re-discovery, at most this often once every backend
# answered the last one (a create asks again whatever the interval).
MIN_REDISCOVERY_INTERVAL = 1.0
# Discovery answers that mean "not with these credentials": relayed when the name stays unknown.
REFUSED = frozenset({401, 403})

Headers = Sequence[tuple[str, str]]


class DuplicateOperationError(BulkOpsError):
    """Two backends serve an operation of the same name (case-insensitively)."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """The outcome of one discovery round."""

    answered: set[str]  # backends that listed their operations
    refusals: list[Refusal]  # 4xx answers (e.g. the caller's credentials were refused)


class OperationRegistry:
    """Operation name -> owning backend, from ``GET /api/operations`` of every backend.

    Filled at start, refreshed every RegistryRefreshInterval, and whenever a caller names an
    operation nobody is known to serve. A backend that cannot be reached keeps the operations
    it was last seen with, so routing to it continues as soon as it is back.

    Args:
        backends: Every configured backend.
        timeout: Seconds each backend gets to answer a discovery.
    """

    def __init__(self, backends: Sequence[Backend], timeout: float) -> None:
        self._backends = list(backends)
        self._timeout = timeout
        self._owners: dict[str, Backend] = {}
        self._descriptors: dict[str, list[dict[str, Any]]] = {}
        self._last_discovery = -MIN_REDISCOVERY_INTERVAL
        self._last_complete = False  # every backend answered the last discovery

    def owner(self, operation_name: str) -> Backend | None:
        """The backend serving ``operation_name`` (case-insensitive), or None."""
        return self._owners.get(operation_name.strip().casefold())

    async def discover(self, headers: Headers = (), *, strict: bool = False) -> Discovery:
        """Ask every backend for its operations and rebuild the map.

        Args:
            headers: Headers for the backends (the caller's credentials, when a caller asked).
            strict: Raise on duplicate names (at start) instead of logging them.

        Returns:
            Which backends answered, and the refusals (4xx) of those that did not.

        Raises:
            DuplicateOperationError: ``strict`` and two backends serve the same name.
        """
        self._last_discovery = time.monotonic()
        answers = await fan_out(
            self._backends, lambda b: _descriptors_of(b, headers), self._timeout
        )
        fresh = {a.backend.name: a.value for a in answers if isinstance(a.value, list)}
        self._last_complete = len(fresh) == len(self._backends)
        self._rebuild({**self._descriptors, **fresh}, strict=strict)
        refusals = [a.value for a in answers if isinstance(a.value, Refusal)]
        for refusal in refusals:
            log.warning("A backend refused discovery with %d", refusal.status_code)
        return Discovery(answered=set(fresh), refusals=refusals)

    async def rediscover_for(
        self, operation_name: str, headers: Headers = (), *, always: bool = False
    ) -> Backend | None:
        """The owner of a name nobody is known to serve, after a fresh discovery with the
        caller's headers. Unless ``always`` (a create), the discovery is skipped when every
        backend answered one less than MIN_REDISCOVERY_INTERVAL ago, so a caller repeating
        an unknown name does not hammer the backends; a discovery some backend refused or
        missed is always asked again (a start-up discovery refused with 401 heals at the
        first request that carries credentials).

        Raises:
            RelayedRefusal: the name is still unknown and a backend refused the caller's
                credentials (401/403): the caller may not see what that backend serves.
        """
        found = self.owner(operation_name)
        if found is not None:
            return found
        recent = time.monotonic() - self._last_discovery < MIN_REDISCOVERY_INTERVAL
        if recent and self._last_complete and not always:
            return None
        discovery = await self.discover(headers)
        found = self.owner(operation_name)
        refused = [r for r in discovery.refusals if r.status_code in REFUSED]
        if found is None and refused:
            raise RelayedRefusal(refused[0])
        return found

    async def run(self, interval: float) -> None:
        """Re-discover every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.discover()
            except Exception:  # keep refreshing whatever one round met
                log.exception("Re-discovery of the backends' operations failed")

    def descriptors(self, backends: set[str] | None = None) -> list[dict[str, Any]]:
        """Known descriptors with their ``sourceService``, by name; only those of
        ``backends`` when given. A name two backends claim is listed for its owner only."""
        merged = [
            descriptor
            for name, items in self._descriptors.items()
            if backends is None or name in backends
            for descriptor in items
        ]
        return sorted(merged, key=lambda d: _key(d))

    def _rebuild(self, by_backend: dict[str, list[dict[str, Any]]], *, strict: bool) -> None:
        backends = {b.name: b for b in self._backends}
        previous = {key: b.name for key, b in self._owners.items()}
        claims: dict[str, list[str]] = {}
        for name in sorted(by_backend):
            for descriptor in by_backend[name]:
                claims.setdefault(_key(descriptor), []).append(name)
        owners: dict[str, Backend] = {}
        for key, names in claims.items():
            winner = names[0]
            if len(names) > 1:
                message = (
                    f"Operation {key!r} is served by backends "
                    + " and ".join(repr(n) for n in names)
                    + ": operation names must be unique across the gateway's backends"
                )
                if strict:
                    raise DuplicateOperationError(message)
                # At a refresh the backend that has served the name so far keeps it.
                winner = previous[key] if previous.get(key) in names else winner
                log.error("%s; routing it to %r", message, winner)
            owners[key] = backends[winner]
        self._owners = owners
        self._descriptors = {
            name: [
                {**descriptor, "sourceService": name}
                for descriptor in items
                if owners[_key(descriptor)].name == name
            ]
            for name, items in by_backend.items()
        }


def _key(descriptor: dict[str, Any]) -> str:
    return str(descriptor.get("name", "")).strip().casefold()


async def _descriptors_of(backend: Backend, headers: Headers) -> list[dict[str, Any]] | Refusal:
    status, body = await backend.get_json(DISCOVERY_PATH, headers=headers)
    if status != 200:
        return Refusal(status, body)
    if not isinstance(body, list):
        raise ValueError("discovery did not answer a list")
    return [d for d in body if isinstance(d, dict)]
