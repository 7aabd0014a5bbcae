"""The ``SourceOpener`` the composition root wires: S3 objects and allow-listed URLs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bulkops.errors import BadRequest
from bulkops.sources.addresses import Resolver, system_resolver
from bulkops.sources.allow import AllowList, parse_target
from bulkops.sources.base import Fetched
from bulkops.sources.http import HttpSource
from bulkops.sources.s3 import S3Source


class UrlSources:
    """Opens a ``sourceUrl``: ``s3://`` when the file store is S3, else allow-listed
    http(s); anything else is refused (400) before anything is fetched.

    Args:
        allow: ``BULKOPS_SOURCE_URL_ALLOW``'s prefixes.
        files_url: ``BULKOPS_FILES_URL`` (``s3://`` sources need an S3 file store).
        s3_endpoint: ``BULKOPS_S3_ENDPOINT``.
        s3_region: ``BULKOPS_S3_REGION``.
        timeout: ``BULKOPS_SOURCE_URL_TIMEOUT``.
        min_rate: ``BULKOPS_BODY_MIN_RATE``, applied to http(s) sources.
        resolver: Host names -> addresses (default: the system's resolver).

    Raises:
        ValueError: an allow-list prefix is not an http(s) URL with a host.
    """

    def __init__(
        self,
        allow: list[str],
        *,
        files_url: str,
        s3_endpoint: str | None = None,
        s3_region: str | None = None,
        timeout: float = 30.0,
        min_rate: float = 0.0,
        resolver: Resolver | None = None,
    ) -> None:
        self._http = HttpSource(
            AllowList(allow), resolver or system_resolver, timeout=timeout, min_rate=min_rate
        )
        self._s3 = (
            S3Source(files_url, endpoint=s3_endpoint, region=s3_region)
            if files_url.lower().startswith("s3://")
            else None
        )

    @asynccontextmanager
    async def open(self, url: str, max_bytes: int) -> AsyncIterator[Fetched]:
        """The file ``url`` names while the context lasts (see ``SourceOpener.open``)."""
        scheme = url.partition(":")[0].lower()
        if scheme == "s3":
            if self._s3 is None:
                raise BadRequest("sourceUrl s3:// is read only when the service's file store is S3")
            async with self._s3.open(url, max_bytes) as fetched:
                yield fetched
            return
        if scheme not in ("http", "https"):
            raise BadRequest("sourceUrl must be s3://bucket/key or an http(s):// URL")
        async with self._http.open(parse_target(url), max_bytes) as fetched:
            yield fetched
