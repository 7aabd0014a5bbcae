"""Reading an ``s3://bucket/key`` ``sourceUrl`` with the service's own S3 settings."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import unquote

import obstore
from obstore.exceptions import BaseError, NotFoundError
from obstore.store import S3Store

from bulkops.errors import BadGateway, BadRequest, PayloadTooLarge
from bulkops.sources.base import Fetched

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

_CHUNK = 1024 * 1024
# S3's bucket naming rules (lowercase letters, digits, dots and hyphens, 3 to 63).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_DRIVER_ERRORS = (BaseError, OSError, ValueError)
# The keys the file store gives uploads (``storage.files``): "2026-11-21/<uuid4 hex>".
_STORED_FILE = re.compile(r"\d{4}-\d{2}-\d{2}/[0-9a-f]{32}")


def _summary(exc: BaseException) -> str:
    # obstore messages carry a multi-line debug dump after the first line.
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class S3Source:
    """Opens ``s3://bucket/key`` objects with the file store's S3 endpoint, region and
    credentials (the usual ``AWS_*`` variables).

    The file store's own objects (``BULKOPS_FILES_URL``: its uploads, possibly of other
    tenants) are refused; other objects of its bucket may be read.

    Args:
        files_url: The file store's ``s3://bucket/prefix``.
        endpoint: A non-AWS S3 endpoint (plain ``http://`` allowed).
        region: The S3 region.
    """

    def __init__(self, files_url: str, *, endpoint: str | None, region: str | None) -> None:
        bucket, _, prefix = files_url.partition("://")[2].partition("/")
        self._own = (bucket, prefix.strip("/"))
        self._config: S3Config = {}
        self._options: ClientConfig = {}
        if endpoint:
            self._config["endpoint"] = endpoint
            self._options["allow_http"] = endpoint.lower().startswith("http://")
        if region:
            self._config["region"] = region
        self._stores: dict[str, S3Store] = {}

    def _parse(self, url: str) -> tuple[str, str]:
        bucket, _, key = url.partition("://")[2].partition("/")
        key = unquote(key)
        if not _BUCKET.fullmatch(bucket) or not key or key.endswith("/"):
            raise BadRequest("sourceUrl must be s3://bucket/key, naming one object")
        own_bucket, own_prefix = self._own
        inside = key[len(own_prefix) + 1 :] if own_prefix else key
        if (
            bucket == own_bucket
            and (not own_prefix or key.startswith(own_prefix + "/"))
            and _STORED_FILE.fullmatch(inside)
        ):
            raise BadRequest("sourceUrl must not name a file of the service's own file store")
        return bucket, key

    def _store(self, bucket: str) -> S3Store:
        store = self._stores.get(bucket)
        if store is None:
            try:
                store = S3Store.from_url(
                    f"s3://{bucket}", config=self._config, client_options=self._options
                )
            except _DRIVER_ERRORS as exc:
                raise BadGateway(f"sourceUrl bucket cannot be opened: {_summary(exc)}") from None
            self._stores[bucket] = store
        return store

    @asynccontextmanager
    async def open(self, url: str, max_bytes: int) -> AsyncIterator[Fetched]:
        """The object while the context lasts.

        Raises:
            BadRequest: not ``s3://bucket/key``, or an object of the file store itself.
            BadGateway: the object is missing or S3 fails.
            PayloadTooLarge: the object is larger than ``max_bytes``.
        """
        bucket, key = self._parse(url)
        try:
            result = await obstore.get_async(self._store(bucket), key)
        except NotFoundError:
            raise BadGateway(f"sourceUrl names no object: s3://{bucket}/{key}") from None
        except _DRIVER_ERRORS as exc:
            raise BadGateway(f"sourceUrl could not be read: {_summary(exc)}") from None
        size = result.meta["size"]
        if max_bytes and size > max_bytes:
            raise PayloadTooLarge(
                f"File exceeds the upload limit of {max_bytes} bytes (the object has {size})",
                limit=max_bytes,
            )
        yield Fetched(key.rsplit("/", 1)[-1] or None, None, _chunks(result.stream(_CHUNK)))


async def _chunks(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    while True:
        try:
            chunk = await anext(stream)
        except StopAsyncIteration:
            return
        except _DRIVER_ERRORS as exc:
            raise BadGateway(f"sourceUrl broke off while read: {_summary(exc)}") from None
        yield bytes(chunk)
