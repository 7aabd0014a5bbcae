"""Contract tests of the file store on memory, a local directory and S3 (moto server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bulkops.errors import StorageError
from bulkops.storage.files import FileMissing, ObjectFileStore, open_file_store
from tests.conftest import S3_REGION


@pytest.fixture(params=["memory", "local", "s3"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ObjectFileStore:
    if store_kind == "memory":
        return open_file_store("memory://")
    if store_kind == "local":
        return open_file_store(f"file://{tmp_path / 'files'}")
    endpoint = request.getfixturevalue("aws_env")
    bucket = f"bulkops-{uuid.uuid4().hex[:12]}"
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name=S3_REGION)
    client.create_bucket(Bucket=bucket)
    return open_file_store(f"s3://{bucket}/uploads", s3_endpoint=endpoint, s3_region=S3_REGION)


async def stream(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def read_all(store: ObjectFileStore, file_id: str) -> bytes:
    return b"".join([chunk async for chunk in store.read(file_id)])


async def stored_names(store: ObjectFileStore, store_kind: str, tmp_path: Path) -> list[str]:
    """Every object the backend holds, unfinished S3 multipart uploads and local files included."""
    if store_kind == "local":
        return [str(p) for p in (tmp_path / "files").rglob("*") if p.is_file()]
    import obstore

    backend = store._store  # the contract has no listing; peek at the backend
    names = [meta["path"] for meta in await obstore.list(backend).collect_async()]
    if store_kind == "s3":
        import boto3

        config = backend.config  # type: ignore[union-attr]
        client = boto3.client("s3", endpoint_url=config["endpoint"], region_name=S3_REGION)
        uploads = client.list_multipart_uploads(Bucket=config["bucket"]).get("Uploads", [])
        names += [f"unfinished:{upload['Key']}" for upload in uploads]
    return names


class UploadAborted(Exception):
    """Stands in for the service's own error raised from inside the upload stream."""


# Large enough to need several 5 MiB multipart parts on S3.
BIG_PARTS = [bytes([i]) * (3 * 1024 * 1024) for i in range(4)]


async def test_round_trip_multi_chunk(store: ObjectFileStore) -> None:
    stored = await store.put(stream(*BIG_PARTS, b"tail"))
    assert stored.size == sum(map(len, BIG_PARTS)) + 4
    assert await read_all(store, stored.file_id) == b"".join(BIG_PARTS) + b"tail"


async def test_empty_upload(store: ObjectFileStore) -> None:
    stored = await store.put(stream())
    assert stored.size == 0
    assert await read_all(store, stored.file_id) == b""


async def test_ids_are_unique_and_generated(store: ObjectFileStore) -> None:
    ids = {(await store.put(stream(b"people.csv"))).file_id for _ in range(5)}
    assert len(ids) == 5
    for file_id in ids:
        assert "people" not in file_id and ".csv" not in file_id


async def test_failing_stream_leaves_nothing_and_reraises(
    store: ObjectFileStore, tmp_path: Path, store_kind: str
) -> None:
    error = UploadAborted("too large")

    async def failing() -> AsyncIterator[bytes]:
        yield BIG_PARTS[0]
        yield BIG_PARTS[1]
        raise error

    with pytest.raises(UploadAborted) as info:
        await store.put(failing())
    assert info.value is error
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert await stored_names(store, store_kind, tmp_path) == []


async def test_stream_failing_before_any_chunk(store: ObjectFileStore) -> None:
    async def failing() -> AsyncIterator[bytes]:
        raise UploadAborted
        yield b""  # pragma: no cover - makes this an async generator

    with pytest.raises(UploadAborted):
        await store.put(failing())


async def test_cancelled_upload_leaves_nothing(
    store: ObjectFileStore, store_kind: str, tmp_path: Path
) -> None:
    started = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield BIG_PARTS[0]
        started.set()
        await asyncio.Event().wait()  # a client that stops sending
        yield b""  # pragma: no cover

    task = asyncio.create_task(store.put(stalled()))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await stored_names(store, store_kind, tmp_path) == []


async def test_backend_failure_is_a_storage_error(aws_env: str) -> None:
    missing_bucket = open_file_store(
        f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}", s3_endpoint=aws_env
    )
    with pytest.raises(StorageError):
        await missing_bucket.put(stream(b"abc"))


async def test_read_of_missing_file(store: ObjectFileStore) -> None:
    missing = f"2020-01-01/{uuid.uuid4().hex}"
    with pytest.raises(FileMissing):
        await read_all(store, missing)
    with pytest.raises(StorageError):
        async with store.local_path(missing):
            pass


@pytest.mark.parametrize(
    "file_id",
    ["../x", "2020-01-01/../../etc/passwd", "/etc/passwd", "", "2020-01-01/ABC", "a/b/c"],
)
async def test_traversal_like_ids_are_rejected(store: ObjectFileStore, file_id: str) -> None:
    with pytest.raises(StorageError):
        await read_all(store, file_id)
    with pytest.raises(StorageError):
        await store.delete(file_id)
    with pytest.raises(StorageError):
        async with store.local_path(file_id):
            pass


async def test_local_path(store: ObjectFileStore, store_kind: str, tmp_path: Path) -> None:
    payload = b"".join(BIG_PARTS[:2]) + b"end"
    stored = await store.put(stream(*BIG_PARTS[:2], b"end"))
    async with store.local_path(stored.file_id) as path:
        assert path.read_bytes() == payload
        kept = path
    if store_kind == "local":
        assert kept.is_relative_to(tmp_path / "files")  # the stored file itself
        assert kept.exists()
    else:
        assert not kept.exists()  # the temporary copy is gone


async def test_local_path_copy_removed_when_body_raises(
    store: ObjectFileStore, store_kind: str
) -> None:
    stored = await store.put(stream(b"abc"))
    with pytest.raises(UploadAborted):
        async with store.local_path(stored.file_id) as path:
            kept = path
            raise UploadAborted
    assert kept.exists() is (store_kind == "local")


async def test_delete_is_idempotent(store: ObjectFileStore) -> None:
    stored = await store.put(stream(b"abc"))
    await store.delete(stored.file_id)
    await store.delete(stored.file_id)
    with pytest.raises(FileMissing):
        await read_all(store, stored.file_id)


def test_relative_file_url_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    open_file_store("file://./data/files")
    assert (tmp_path / "data" / "files").is_dir()


@pytest.mark.parametrize("url", ["ftp://host/x", "nothing", "gs://bucket", "file://"])
def test_unsupported_urls(url: str) -> None:
    with pytest.raises(StorageError):
        open_file_store(url)
