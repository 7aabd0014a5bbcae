"""Faults of the file store: S3 (moto's server) behind a proxy the test controls (refusing
connections, answering 503, slow), and a local directory and a SQLite database on a full
file system (a 1 MiB tmpfs, mounted when the tests run as root; skipped otherwise).

Uploads answer 503 (507 for a full disk) with the error body and store nothing; downloads
answer 503 before any byte of a body; processing waits for the store and goes on within
seconds of it coming back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest

from tests.conftest import S3_REGION
from tests.e2e.faults import TcpProxy
from tests.integration import operations as ops
from tests.integration.conftest import ClientFactory, create, create_ok, wait_status

CONTENT = "name,email\nAda,a@x.io\nBob,b@x.io\nCyd,c@x.io\n"
TIMEOUT = 2.0  # BULKOPS_STORAGE_TIMEOUT here


@pytest.fixture
def s3_proxy(aws_env: str) -> Iterator[TcpProxy]:
    """A proxy in front of the moto server."""
    target = urlsplit(aws_env)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 80)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def s3_settings(tmp_path: Path, bucket: str, proxy: TcpProxy) -> dict[str, Any]:
    return {
        "database_url": f"sqlite:///{tmp_path}/shared.sqlite",
        "files_url": f"s3://{bucket}/uploads",
        "s3_endpoint": f"http://127.0.0.1:{proxy.port}",
        "s3_region": S3_REGION,
        "storage_timeout": TIMEOUT,
    }


def stored_objects(endpoint: str, bucket: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name=S3_REGION)
    listing = client.list_objects_v2(Bucket=bucket)
    uploads = client.list_multipart_uploads(Bucket=bucket)
    return [item["Key"] for item in listing.get("Contents", [])] + [
        f"(multipart) {item['Key']}" for item in uploads.get("Uploads", [])
    ]


@pytest.mark.parametrize(("fault", "chunk_rows"), [("refuse", 0), ("503", 0), ("refuse", 1)])
async def test_an_unreachable_s3_refuses_uploads_and_downloads_and_processing_waits(
    make_client: ClientFactory,
    aws_env: str,
    s3_bucket: str,
    s3_proxy: TcpProxy,
    tmp_path: Path,
    fault: str,
    chunk_rows: int,
) -> None:
    settings = s3_settings(tmp_path, s3_bucket, s3_proxy)
    settings["chunk_rows"] = chunk_rows  # 1: three chunks, each reading the file
    api = await make_client(role="api", **settings)
    operation_id = await create_ok(api, CONTENT)  # stored while S3 answers
    assert len(stored_objects(aws_env, s3_bucket)) == 1

    if fault == "refuse":
        s3_proxy.stop()
    else:
        s3_proxy.answer(503)
    refused_at = time.monotonic()
    upload = await create(api, CONTENT, metadata={"requestedBy": "tests"})
    took = time.monotonic() - refused_at
    assert upload.status_code == 503, upload.text
    assert upload.json() == {"error": "Storage is unavailable; try again later"}
    assert took < 3 * TIMEOUT + 2, took
    assert len(stored_objects(aws_env, s3_bucket)) == 1  # nothing half-stored

    download = await api.get(f"/api/bulks/{operation_id}/file")
    assert download.status_code == 503  # not a 200 that breaks off
    assert download.json() == {"error": "Storage is unavailable; try again later"}
    status = await api.get(f"/api/bulks/{operation_id}/status")
    assert status.status_code == 200  # the database answers
    assert (await api.get("/health/ready")).status_code == 200

    # A processing instance starts while S3 is down: the operation waits for the file.
    worker = await make_client(**settings)
    await asyncio.sleep(3 * TIMEOUT)
    waiting = (await worker.get(f"/api/bulks/{operation_id}/status")).json()
    assert waiting["status"] in ("Pending", "Running"), waiting
    assert ops.PROCESSED == []

    if fault == "refuse":
        s3_proxy.start()
    else:
        s3_proxy.heal()
    back_at = time.monotonic()
    final = await wait_status(worker, operation_id, timeout=60)
    resumed_in = time.monotonic() - back_at
    assert (final["status"], final["processedRows"]) == ("Completed", 3)
    assert sorted(ops.PROCESSED) == ["Ada", "Bob", "Cyd"]  # each row once
    assert resumed_in < 10, resumed_in  # a backoff of the store coming back, not minutes
    download = await api.get(f"/api/bulks/{operation_id}/file")
    assert download.status_code == 200 and download.text == CONTENT
    took_text = f"upload 503 in {took:.1f} s"
    print(f"\nS3 {fault} ({chunk_rows=}): {took_text}; done {resumed_in:.1f} s after its return")


async def test_a_slow_s3_is_only_slow(
    make_client: ClientFactory, aws_env: str, s3_bucket: str, s3_proxy: TcpProxy, tmp_path: Path
) -> None:
    client = await make_client(**s3_settings(tmp_path, s3_bucket, s3_proxy))
    s3_proxy.slow(0.2)
    operation_id = await create_ok(client, CONTENT)
    final = await wait_status(client, operation_id, timeout=60)
    assert (final["status"], final["processedRows"]) == ("Completed", 3)
    download = await client.get(f"/api/bulks/{operation_id}/file")
    assert download.status_code == 200 and download.text == CONTENT


# --- a full disk ---------------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(path: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


async def test_a_full_disk_under_the_local_store_answers_507_and_keeps_nothing(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        client = await make_client(files_url=f"file://{disk}/files")
        small = await create_ok(client, CONTENT)
        kept = files_under(disk)
        assert len(kept) == 1

        big = "name,email\n" + "".join(f"n{i},{i}@example.com\n" for i in range(60_000))
        upload = await create(client, big, metadata={"requestedBy": "tests"})
        assert upload.status_code == 507, upload.text
        assert upload.json() == {"error": "Storage is full; nothing was stored: try again later"}
        assert files_under(disk) == kept  # nothing half-stored
        listing = (await client.get("/api/bulks")).json()
        assert [item["id"] for item in listing["items"]] == [small]

        # Room again: the same upload is taken.
        assert (await create(client, CONTENT, metadata={"requestedBy": "tests"})).status_code == 201
        final = await wait_status(client, small)
        assert final["status"] == "Completed"


async def test_a_full_disk_under_sqlite_answers_507_then_goes_on(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "disk", "2m") as disk:
        client = await make_client(database_url=f"sqlite:///{disk}/bulkops.sqlite")
        first = await create_ok(client, CONTENT)
        await wait_status(client, first)
        filler = disk / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        upload = await create(client, CONTENT, metadata={"requestedBy": "tests"})
        assert upload.status_code == 507, upload.text
        assert (await client.get(f"/api/bulks/{first}/status")).status_code == 200
        filler.unlink()
        second = await create_ok(client, CONTENT)
        assert (await wait_status(client, second))["status"] == "Completed"


# --- exports ---------------------------------------------------------------------------


class _RowsDown:
    """A row store whose batch reads find storage unreachable (the rest passes through)."""

    def __init__(self, rows: Any) -> None:
        self._rows = rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rows, name)

    async def report_batches(self, *args: Any, **kwargs: Any) -> Any:
        from bulkops.errors import StorageUnavailable

        raise StorageUnavailable("database read failed: connection refused")
        yield  # an async generator, as the store's


async def test_an_export_whose_rows_cannot_be_read_answers_503_before_its_body(
    make_client: ClientFactory,
) -> None:
    from tests.integration.conftest import runtime_of

    client = await make_client()
    operation_id = await create_ok(client, CONTENT)
    await wait_status(client, operation_id)
    exports = runtime_of(client).exports
    exports._rows = _RowsDown(exports._rows)  # type: ignore[assignment]
    answer = await client.get(f"/api/bulks/{operation_id}/export")
    assert answer.status_code == 503  # not a 200 that breaks off
    assert answer.json() == {"error": "Storage is unavailable; try again later"}
