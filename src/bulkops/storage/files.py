"""The file store: uploads kept on a local directory, in memory or on S3, via obstore."""

from __future__ import annotations

import asyncio
import errno
import re
import tempfile
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import obstore
from obstore.exceptions import BaseError, GenericError, NotFoundError
from obstore.store import LocalStore, MemoryStore, S3Store

from bulkops.errors import StorageError, StorageFull, StorageUnavailable
from bulkops.storage.records import StoredFile

if TYPE_CHECKING:
    from obstore import AsyncWritableFile
    from obstore.store import ClientConfig, ObjectStore, RetryConfig, S3Config

# Ids look like "2026-11-21/<uuid4 hex>": the day folder keeps directories and listings
# small; nothing in an id ever comes from the uploaded file's name.
_FILE_ID = re.compile(r"\d{4}-\d{2}-\d{2}/[0-9a-f]{32}")

# What obstore raises: its own errors, OSError subclasses (FileNotFoundError for a missing
# object) and ValueError for paths it refuses.
_DRIVER_ERRORS = (BaseError, OSError, ValueError)

_MIB = 1024 * 1024


class FileMissing(StorageError):
    """The requested file is not in the store."""


def _checked(file_id: str) -> str:
    # Ids come back from stored records, but never let one address anything else.
    if not isinstance(file_id, str) or not _FILE_ID.fullmatch(file_id):
        raise StorageError(f"Invalid file id: {file_id!r}")
    return file_id


def _translate(exc: Exception, file_id: str) -> StorageError:
    if isinstance(exc, FileNotFoundError | NotFoundError):
        return FileMissing(f"File {file_id} does not exist")
    # obstore messages carry a multi-line debug dump after the first line.
    summary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    message = f"File store failed on {file_id}: {type(exc).__name__}: {summary}"
    if _disk_full(exc):
        return StorageFull(message)
    if isinstance(exc, _TRANSIENT) and not isinstance(exc, PermissionError):
        # unreachable, timed out, 5xx: may work later
        return StorageUnavailable(message)
    return StorageError(message)


# Errors of a store that did not answer or answered 5xx (obstore's generic error carries
# those; its specific ones are answers: missing, refused, bad path).
_TRANSIENT = (GenericError, OSError)


def _disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk under the store is full (ENOSPC, as an OSError or in
    the text of obstore's error)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    text = str(exc)
    return "No space left on device" in text or "os error 28" in text


class _Pump:
    """Copies an upload stream into an obstore writer, telling source errors apart."""

    def __init__(self, chunks: AsyncIterable[bytes]) -> None:
        self._chunks = aiter(chunks)
        self.size = 0
        self.error: BaseException | None = None

    async def into(self, writer: AsyncWritableFile) -> None:
        while True:
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                return
            except BaseException as exc:
                self.error = exc
                raise
            self.size += len(chunk)
            await writer.write(chunk)


class ObjectFileStore:
    """A ``FileStore`` on any obstore store (``LocalStore``, ``MemoryStore``, ``S3Store``).

    Args:
        store: The obstore store; a ``LocalStore`` should have an absolute prefix.
        chunk_size: Size of the chunks ``read`` yields and ``local_path`` copies.
        part_size: Upload part size (S3 needs at least 5 MiB for all parts but the last).
        temp_dir: Where ``local_path`` puts temporary copies (system default when None).
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        chunk_size: int = _MIB,
        part_size: int = 5 * _MIB,
        temp_dir: Path | None = None,
    ) -> None:
        self._store = store
        self._chunk_size = chunk_size
        self._part_size = part_size
        self._temp_dir = temp_dir
        self._local_root: Path | None = None
        if isinstance(store, LocalStore):
            self._local_root = store.prefix or Path("/")

    async def put(self, chunks: AsyncIterable[bytes]) -> StoredFile:
        """Store a stream of bytes under a new generated id.

        The stream is passed through part by part, never joined in memory. When
        ``chunks`` raises, any partial object is removed and that same exception is
        re-raised unchanged.

        Raises:
            StorageError: The backend failed.
        """
        file_id = f"{datetime.now(UTC):%Y-%m-%d}/{uuid.uuid4().hex}"
        pump = _Pump(chunks)
        failure: BaseException | None = None
        try:
            # We iterate the source ourselves rather than handing it to obstore: its errors
            # and cancellations then surface here, and leaving the writer's context with an
            # exception aborts the upload (multipart parts or a staging file included).
            # Parts of ``part_size``, two in flight at most: bounded memory per upload.
            writer = obstore.open_writer_async(
                self._store, file_id, buffer_size=self._part_size, max_concurrency=2
            )
            async with writer:
                await pump.into(writer)
        except BaseException as exc:
            await self._discard(file_id)
            if pump.error is None and isinstance(exc, _DRIVER_ERRORS):
                raise _translate(exc, file_id) from exc
            failure = pump.error or exc
        if failure is not None:
            # Raised outside the handler so the caller's exception keeps its own context.
            raise failure
        return StoredFile(file_id=file_id, size=pump.size)

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        """Stream the bytes of a stored file.

        Raises:
            FileMissing: No such file (raised on first iteration).
            StorageError: Invalid id or backend failure.
        """
        path = _checked(file_id)
        try:
            result = await obstore.get_async(self._store, path)
            stream = result.stream(min_chunk_size=self._chunk_size)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, file_id) from exc
        while True:
            try:
                chunk = await anext(stream)
            except StopAsyncIteration:
                return
            except _DRIVER_ERRORS as exc:
                raise _translate(exc, file_id) from exc
            yield chunk

    @asynccontextmanager
    async def local_path(self, file_id: str) -> AsyncIterator[Path]:
        """A local file holding the stored bytes while the context lasts.

        A local directory store yields its own file (no copy); other stores stream a
        temporary copy that is deleted on exit.

        Raises:
            FileMissing: No such file.
            StorageError: Invalid id or backend failure.
        """
        path = _checked(file_id)
        if self._local_root is not None:
            local = self._local_root / path
            if not local.is_file():
                raise FileMissing(f"File {file_id} does not exist")
            yield local
            return
        copy = await asyncio.to_thread(self._temp_file)
        try:
            await self._copy_to(file_id, copy)
            yield copy
        finally:
            await asyncio.to_thread(copy.unlink, True)

    async def delete(self, file_id: str) -> None:
        """Remove a stored file; a missing file is not an error.

        Raises:
            StorageError: Invalid id or backend failure.
        """
        path = _checked(file_id)
        try:
            await obstore.delete_async(self._store, path)
        except (FileNotFoundError, NotFoundError):
            return
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, file_id) from exc

    def _temp_file(self) -> Path:
        with tempfile.NamedTemporaryFile(
            prefix="bulkops-", suffix=".data", dir=self._temp_dir, delete=False
        ) as handle:
            return Path(handle.name)

    async def _copy_to(self, file_id: str, target: Path) -> None:
        with target.open("wb") as handle:
            async for chunk in self.read(file_id):
                # Disk writes of megabyte chunks would stall the event loop.
                await asyncio.to_thread(handle.write, chunk)

    async def _discard(self, file_id: str) -> None:
        """Best-effort removal of a failed upload; the original failure matters more."""
        try:
            await obstore.delete_async(self._store, file_id)
        except _DRIVER_ERRORS:
            pass


def _local_dir(rest: str) -> Path:
    """The directory of a ``file://`` URL: absolute, or relative to the working directory."""
    if rest.startswith("localhost/"):
        rest = rest[len("localhost") :]
    directory = Path(unquote(rest)).resolve()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"Cannot create the file store directory {directory}: {exc}") from exc
    return directory


def open_file_store(
    url: str,
    *,
    s3_endpoint: str | None = None,
    s3_region: str | None = None,
    timeout: float | None = None,
) -> ObjectFileStore:
    """Open the file store a URL names.

    Supported URLs: ``file:///abs/dir``, ``file://./rel/dir`` (relative to the working
    directory; the directory is created), ``memory://`` and ``s3://bucket/prefix``. S3
    credentials come from the usual ``AWS_*`` variables, read by obstore itself.

    Args:
        url: The store URL.
        s3_endpoint: A non-AWS S3 endpoint (MinIO, moto...); plain ``http://`` is allowed.
        s3_region: The S3 region.
        timeout: S3: seconds to connect, and to go on retrying a request that failed for
            want of the store (unreachable, 5xx) before the failure is raised (None or 0:
            obstore's defaults, 5 s and 3 minutes).

    Raises:
        StorageError: Unsupported URL, or the store cannot be set up.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or not scheme:
        raise StorageError(f"Unsupported file store URL: {url!r}")
    if scheme == "memory":
        return ObjectFileStore(MemoryStore())
    if scheme == "file" and rest:
        return ObjectFileStore(LocalStore(prefix=_local_dir(rest)))
    if scheme == "s3":
        options: ClientConfig = {}
        config: S3Config = {}
        if s3_endpoint:
            config["endpoint"] = s3_endpoint
            options["allow_http"] = s3_endpoint.lower().startswith("http://")
        if s3_region:
            config["region"] = s3_region
        retry: RetryConfig | None = None
        if timeout:
            options["connect_timeout"] = timedelta(seconds=timeout)
            retry = {"max_retries": 10, "retry_timeout": timedelta(seconds=timeout)}
        try:
            store = S3Store.from_url(url, config=config, client_options=options, retry_config=retry)
        except _DRIVER_ERRORS as exc:
            raise StorageError(f"Cannot open the S3 file store {url!r}: {exc}") from exc
        return ObjectFileStore(store)
    raise StorageError(f"Unsupported file store URL scheme {scheme!r} in {url!r}")
