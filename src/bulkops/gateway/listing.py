"""The merged operation list: ``GET /api/bulks`` over every backend, newest first."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bulkops.gateway.backend import Backend
from bulkops.gateway.errors import BackendUnavailable, Refusal, RelayedRefusal
from bulkops.gateway.fanout import fan_out
from bulkops.gateway.idcache import IdCache
from bulkops.gateway.merge import merge_newest_first, page_of

log = logging.getLogger("bulkops.gateway")

LIST_PATH = "/api/bulks"
BACKEND_MAX_PAGE_SIZE = 1000  # the most rows an instance returns per page

Params = Sequence[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Prefix:
    """The newest rows of one backend's list and its total count."""

    items: list[dict[str, Any]]
    total: int


class MergedList:
    """Serves a page of the list merged over every backend.

    To serve page N of size S it reads the newest ``min(N*S, prefix_bound)`` rows of each
    backend (the prefix that can hold the page), merges the prefixes newest first and slices
    the page: pages are true pages of the union as long as N*S stays within the bound. Beyond
    it the page may miss rows and a warning is logged.

    Args:
        backends: Every configured backend.
        cache: Learns the owner of every operation served.
        timeout: Seconds each backend gets to answer.
        prefix_bound: Most rows read from one backend per page (ListPrefixBound).
    """

    def __init__(
        self, backends: Sequence[Backend], cache: IdCache, timeout: float, prefix_bound: int
    ) -> None:
        self._backends = list(backends)
        self._cache = cache
        self._timeout = timeout
        self._bound = prefix_bound

    async def page(
        self, page: int, page_size: int, filters: Params, headers: Params
    ) -> dict[str, Any]:
        """One page of the merged list, in the paged envelope.

        Args:
            page: 1-based page number.
            page_size: Rows per page (already clamped like an instance does).
            filters: The caller's other query parameters, passed to every backend.
            headers: Headers for the backends (the caller's credentials).

        Raises:
            RelayedRefusal: no backend answered 200 and one refused the request (4xx).
            BackendUnavailable: no backend answered at all.
        """
        need = min(page * page_size, self._bound)
        answers = await fan_out(
            self._backends, lambda b: self._prefix(b, need, filters, headers), self._timeout
        )
        prefixes = [a.value for a in answers if isinstance(a.value, Prefix)]
        refusals = [a.value for a in answers if isinstance(a.value, Refusal)]
        if not prefixes and refusals:
            raise RelayedRefusal(refusals[0])
        if not prefixes and self._backends:
            raise BackendUnavailable("No backend answered the list request")
        if page * page_size > self._bound and any(p.total > self._bound for p in prefixes):
            log.warning(
                "Page %d (of %d rows) reaches past the list prefix bound of %d rows per "
                "backend: the page may be incomplete (use source=NAME for native paging)",
                page,
                page_size,
                self._bound,
            )
        items = page_of(merge_newest_first(p.items for p in prefixes), page, page_size)
        owners = {
            str(item["id"]): answer.backend.name
            for answer in answers
            if isinstance(answer.value, Prefix)
            for item in answer.value.items
        }
        for item in items:  # a listed operation is likely to be asked about next
            self._cache.put(str(item["id"]), owners[str(item["id"])])
        total = sum(p.total for p in prefixes)
        return {
            "items": items,
            "totalCount": total,
            "page": page,
            "pageSize": page_size,
            "hasNextPage": page * page_size < total,
        }

    async def _prefix(
        self, backend: Backend, need: int, filters: Params, headers: Params
    ) -> Prefix | Refusal:
        chunk = min(need, BACKEND_MAX_PAGE_SIZE)
        items: list[dict[str, Any]] = []
        number = 1
        while True:
            params = [*filters, ("page", str(number)), ("pageSize", str(chunk))]
            status, body = await backend.get_json(LIST_PATH, params=params, headers=headers)
            if status != 200:
                return Refusal(status, body)
            items.extend(body["items"])
            if len(items) >= need or not body["hasNextPage"]:
                return Prefix(items[:need], int(body["totalCount"]))
            number += 1
