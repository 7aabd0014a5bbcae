"""The gateway's composition root: every part built from ``GatewaySettings``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from starlette.requests import Request

from bulkops.gateway.backend import Backend, OutgoingHook
from bulkops.gateway.feed import CallerFeeds
from bulkops.gateway.forwarding import backend_headers
from bulkops.gateway.idcache import IdCache
from bulkops.gateway.listing import MergedList
from bulkops.gateway.locator import OwnerLocator
from bulkops.gateway.metrics import GatewayMetrics
from bulkops.gateway.registry import OperationRegistry
from bulkops.gateway.settings import GatewaySettings

log = logging.getLogger("bulkops.gateway")


class Gateway:
    """Everything one gateway process runs on: a client per backend, the operation registry,
    the id cache, the merged list, the merged event feed and the metrics.

    Args:
        settings: The configuration; ``settings.backends`` names every backend.
        hooks: Outgoing hooks, run on every backend request.
    """

    def __init__(self, settings: GatewaySettings, hooks: Sequence[OutgoingHook] = ()) -> None:
        self.settings = settings
        self.backends = {
            name: Backend(name, url, settings, hooks) for name, url in settings.backends.items()
        }
        every = list(self.backends.values())
        timeout = settings.fan_out_timeout_per_backend
        self.cache = IdCache(settings.id_cache_ttl)
        self.registry = OperationRegistry(every, timeout)
        self.locator = OwnerLocator(every, self.cache, timeout)
        self.listing = MergedList(every, self.cache, timeout, settings.list_prefix_bound)
        self.feed = CallerFeeds(every, timeout)
        self.metrics = GatewayMetrics(every)
        self._refresher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Discover every backend's operations, then keep re-discovering them.

        Raises:
            DuplicateOperationError: two backends serve the same operation name.
        """
        if not self.backends:
            log.warning("The gateway has no backends: configure some with --backend NAME=URL")
        answered = (await self.registry.discover(strict=True)).answered
        log.info(
            "Gateway over %d backend(s), %d answered discovery: %s",
            len(self.backends),
            len(answered),
            ", ".join(f"{b.name}={b.url}" for b in self.backends.values()) or "none",
        )
        self._refresher = asyncio.create_task(
            self.registry.run(self.settings.registry_refresh_interval)
        )

    async def close(self) -> None:
        """Stop re-discovery and close every backend connection."""
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        for backend in self.backends.values():
            await backend.aclose()

    def backend_named(self, name: str) -> Backend | None:
        """The backend of that name (exact, else case-insensitive), or None."""
        found = self.backends.get(name)
        if found is None:
            matches = [b for n, b in self.backends.items() if n.casefold() == name.casefold()]
            found = matches[0] if len(matches) == 1 else None
        return found

    def headers_for(self, request: Request) -> list[tuple[str, str]]:
        """The caller's headers as backends get them (ForwardBearerToken applied)."""
        return backend_headers(request, forward_bearer=self.settings.forward_bearer_token)


def gateway_of(request: Request) -> Gateway:
    """The gateway serving a request."""
    gateway: Gateway = request.app.state.gateway
    return gateway
