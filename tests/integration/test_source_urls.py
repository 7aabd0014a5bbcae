"""``sourceUrl``: a create or validate reads its file from S3 or an allow-listed URL,
and nothing outside the allow list is ever fetched (a real HTTP source on loopback, S3
through moto's server, host names resolved through the resolver seam)."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

import bulkops as bo
from bulkops.sources import http as http_source
from tests.conftest import S3_REGION
from tests.integration import operations as ops
from tests.integration.conftest import wait_status
from tests.source_server import SourceServer, source_server

CSV = b"name,email\nAda,ada@example.com\nBob,bob@example.com\n"
META = '{"requestedBy": "tests"}'
NAME = "files.example.test"

Make = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
def server() -> Iterator[SourceServer]:
    with source_server() as running:
        running.files["/files/rows.csv"] = CSV
        running.files["/files/monthly%20export.csv"] = CSV
        yield running


class Resolver:
    """Resolves the names it was told (and counts the look-ups); any other name fails."""

    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.names[host]


@pytest.fixture
def resolver() -> Resolver:
    return Resolver()


@pytest.fixture
async def make(tmp_path: Path, resolver: Resolver) -> AsyncIterator[Make]:
    """``make(**settings) -> client`` on SQLite and local files, names resolved by
    ``resolver``."""
    async with AsyncExitStack() as stack:
        count = 0

        async def build(**overrides: Any) -> httpx.AsyncClient:
            nonlocal count
            count += 1
            values: dict[str, Any] = {
                "database_url": f"sqlite:///{tmp_path}/db{count}.sqlite",
                "files_url": f"file://{tmp_path}/files{count}",
                "flush_interval": 0.05,
                **overrides,
            }
            app = bo.create_app(ops.ALL, bo.Settings(**values), source_resolver=resolver)
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bulkops.test"
            )
            return await stack.enter_async_context(client)

        yield build


async def create_from(client: httpx.AsyncClient, url: str, **extra: str) -> httpx.Response:
    data = {"operationName": "record", "metadata": META, "sourceUrl": url, **extra}
    return await client.post("/api/bulks", data=data)


async def validate_from(client: httpx.AsyncClient, url: str) -> httpx.Response:
    data = {"operationName": "record", "metadata": META, "sourceUrl": url}
    return await client.post("/api/bulks/validate", data=data)


async def nothing_created(client: httpx.AsyncClient) -> bool:
    return (await client.get("/api/bulks")).json()["totalCount"] == 0


# --- allowed URLs -----------------------------------------------------------------------


async def test_an_allowed_url_is_read_like_an_upload(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=f"{server.base}/files/")
    valid = await validate_from(client, f"{server.base}/files/rows.csv")
    assert valid.status_code == 200, valid.text
    created = await create_from(client, f"{server.base}/files/monthly%20export.csv?v=2")
    assert created.status_code == 201, created.text
    operation_id = created.json()["operationId"]
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["fileName"] == "monthly export.csv"
    assert detail["fileSize"] == len(CSV)
    assert detail["fileSha256"] == hashlib.sha256(CSV).hexdigest()
    assert (await wait_status(client, operation_id))["status"] == "Completed"
    assert (await client.get(f"/api/bulks/{operation_id}/file")).content == CSV
    # A multipart form works as well as a url-encoded one.
    multipart = await client.post(
        "/api/bulks",
        data={"operationName": "record", "metadata": META},
        files={"sourceUrl": (None, f"{server.base}/files/rows.csv")},
    )
    assert multipart.status_code == 201, multipart.text


async def test_a_duplicate_from_a_url_is_seen(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=server.base + "/")
    first = (await create_from(client, f"{server.base}/files/rows.csv")).json()["operationId"]
    seen = await validate_from(client, f"{server.base}/files/monthly%20export.csv")
    assert seen.json()["duplicateOf"] == first
    refused = await create_from(client, f"{server.base}/files/rows.csv", rejectDuplicate="true")
    assert refused.status_code == 409 and refused.json()["duplicateOf"] == first


# --- refusals: nothing fetched -----------------------------------------------------------


async def test_urls_outside_the_allow_list_are_400_and_never_fetched(
    make: Make, server: SourceServer
) -> None:
    port = server.base.rsplit(":", 1)[1]
    client = await make(source_url_allow=f"{server.base}/files/")
    refused = [
        f"{server.base}/error",  # another path
        f"http://127.0.0.2:{port}/files/rows.csv",  # an IP literal outside the list
        f"http://localhost:{port}/files/rows.csv",
        f"https://127.0.0.1:{port}/files/rows.csv",  # another scheme
        f"{server.base}/files/../error",
        f"{server.base}/files/%2e%2e/error",
        f"http://127.0.0.1:{port}@169.254.169.254/files/rows.csv",
        f"http://127.0.0.1:{port}/files/rows.csv#x",
        "file:///etc/passwd",
        "ftp://127.0.0.1/files/rows.csv",
        "gopher://127.0.0.1:6379/_INFO",
        "s3://bucket/key.csv",  # the file store is not S3
        "not a url",
    ]
    for url in refused:
        for send in (create_from, validate_from):
            answer = await send(client, url)
            assert answer.status_code == 400, (url, answer.text)
    assert server.requests == []
    assert await nothing_created(client)


async def test_a_bad_request_fetches_nothing(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=server.base + "/")
    url = f"{server.base}/files/rows.csv"
    assert (await create_from(client, url, operationName="nope")).status_code == 400
    assert (await create_from(client, url, metadata="{}")).status_code == 422
    assert (await create_from(client, url, mapping="unknown")).status_code == 400
    assert (await validate_from(client, url + "x")).status_code == 502  # fetched: 404
    assert [path for _, path in server.requests] == ["/files/rows.csvx"]


async def test_an_empty_allow_list_refuses_every_url(make: Make, server: SourceServer) -> None:
    client = await make()
    answer = await create_from(client, f"{server.base}/files/rows.csv")
    assert answer.status_code == 400
    assert "BULKOPS_SOURCE_URL_ALLOW" in answer.json()["error"]
    assert server.requests == []


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.1"],
        ["169.254.169.254"],
        ["10.1.2.3"],
        ["192.168.1.10"],
        ["100.64.0.1"],
        ["0.0.0.0"],
        ["224.0.0.1"],
        ["::1"],
        ["::ffff:127.0.0.1"],
        ["::ffff:169.254.169.254"],
        ["fe80::1"],
        ["fd00::1"],
        ["64:ff9b::a9fe:a9fe"],
        ["93.184.215.14", "10.0.0.1"],  # one inside is enough to refuse
    ],
)
async def test_a_name_resolving_inside_is_never_fetched(
    make: Make, server: SourceServer, resolver: Resolver, addresses: list[str]
) -> None:
    port = server.base.rsplit(":", 1)[1]
    resolver.names[NAME] = addresses
    client = await make(source_url_allow=f"http://{NAME}:{port}/")
    answer = await create_from(client, f"http://{NAME}:{port}/files/rows.csv")
    assert answer.status_code == 400, answer.text
    assert "not a public address" in answer.json()["error"]
    assert server.requests == []
    assert await nothing_created(client)


async def test_a_public_name_is_fetched_from_the_address_checked(
    make: Make, server: SourceServer, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection goes to the address the check passed (never a second look-up that
    could answer differently), with the name in the Host header. Loopback stands in for a
    public address here: the check is told 127.0.0.1 is public, and nothing else."""
    monkeypatch.setattr(http_source, "is_public", lambda address: str(address) == "127.0.0.1")
    port = server.base.rsplit(":", 1)[1]
    resolver.names[NAME] = ["127.0.0.1"]
    client = await make(source_url_allow=f"http://{NAME}:{port}/files/")
    created = await create_from(client, f"http://{NAME}:{port}/files/rows.csv")
    assert created.status_code == 201, created.text
    assert server.requests == [(f"{NAME}:{port}", "/files/rows.csv")]
    assert resolver.calls == [NAME]
    resolver.names[NAME] = ["127.0.0.2"]  # the name now points elsewhere: refused
    assert (await create_from(client, f"http://{NAME}:{port}/files/rows.csv")).status_code == 400
    assert len(server.requests) == 1


# --- failing sources: 502, nothing created -----------------------------------------------


async def test_redirects_are_not_followed(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=server.base + "/")
    answer = await create_from(client, f"{server.base}/redirect/rows.csv")
    assert answer.status_code == 502
    assert "redirect" in answer.json()["error"]
    assert [path for _, path in server.requests] == ["/redirect/rows.csv"]
    assert await nothing_created(client)


async def test_a_failing_source_is_502_with_the_reason(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=server.base + "/")
    failing = await create_from(client, f"{server.base}/error")
    assert failing.status_code == 502
    assert "503" in failing.json()["error"]
    missing = await validate_from(client, f"{server.base}/files/none.csv")
    assert missing.status_code == 502 and "404" in missing.json()["error"]
    assert await nothing_created(client)


async def test_an_unreachable_source_is_502(make: Make, resolver: Resolver) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = await make(source_url_allow=f"http://127.0.0.1:{port}/,http://{NAME}/")
    answer = await create_from(client, f"http://127.0.0.1:{port}/rows.csv")
    assert answer.status_code == 502, answer.text
    unknown = await create_from(client, f"http://{NAME}/rows.csv")  # the name does not resolve
    assert unknown.status_code == 502 and NAME in unknown.json()["error"]
    assert await nothing_created(client)


async def test_a_stalled_body_is_502(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=server.base + "/", source_url_timeout=0.3)
    answer = await create_from(client, f"{server.base}/stalls.csv")
    assert answer.status_code == 502, answer.text
    assert await nothing_created(client)


async def test_a_trickling_body_is_502(make: Make, server: SourceServer) -> None:
    client = await make(
        source_url_allow=server.base + "/", source_url_timeout=0.5, body_min_rate=1000
    )
    answer = await create_from(client, f"{server.base}/drip.csv")
    assert answer.status_code == 502, answer.text
    assert "too slow" in answer.json()["error"]
    assert await nothing_created(client)


async def test_an_endless_or_oversized_body_is_413(
    make: Make, server: SourceServer, tmp_path: Path
) -> None:
    client = await make(source_url_allow=server.base + "/", max_upload_bytes=200_000)
    endless = await create_from(client, f"{server.base}/endless.csv")
    assert endless.status_code == 413, endless.text
    declared = await validate_from(client, f"{server.base}/declared-huge.csv")
    assert declared.status_code == 413
    assert await nothing_created(client)
    assert not [p for p in (tmp_path / "files1").rglob("*") if p.is_file()]


async def test_a_file_and_a_url_together_are_400(make: Make, server: SourceServer) -> None:
    client = await make(source_url_allow=server.base + "/")
    answer = await client.post(
        "/api/bulks",
        data={"operationName": "record", "metadata": META, "sourceUrl": server.base + "/x"},
        files={"file": ("rows.csv", CSV, "text/csv")},
    )
    assert answer.status_code == 400
    assert server.requests == []


def test_a_malformed_allow_list_stops_the_service_at_start() -> None:
    from bulkops.sources.allow import AllowList

    for prefix in ("ftp://files.example.com/", "files.example.com", "https://"):
        with pytest.raises(ValueError, match="BULKOPS_SOURCE_URL_ALLOW"):
            AllowList([prefix])


# --- S3 ----------------------------------------------------------------------------------


async def test_an_s3_object_is_read_with_the_service_s3_settings(
    make: Make, s3_bucket: str, aws_env: str
) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=aws_env, region_name=S3_REGION)
    s3.put_object(Bucket=s3_bucket, Key="imports/2026/users.csv", Body=CSV)
    client = await make(
        files_url=f"s3://{s3_bucket}/files", s3_endpoint=aws_env, s3_region=S3_REGION
    )
    assert (
        await validate_from(client, f"s3://{s3_bucket}/imports/2026/users.csv")
    ).status_code == 200
    created = await create_from(client, f"s3://{s3_bucket}/imports/2026/users.csv")
    assert created.status_code == 201, created.text
    operation_id = created.json()["operationId"]
    detail = (await client.get(f"/api/bulks/{operation_id}")).json()
    assert detail["fileName"] == "users.csv"
    assert detail["fileSha256"] == hashlib.sha256(CSV).hexdigest()
    assert (await wait_status(client, operation_id))["status"] == "Completed"
    missing = await create_from(client, f"s3://{s3_bucket}/imports/none.csv")
    assert missing.status_code == 502
    # The file store's own objects (other operations' uploads) are not a source.
    own = await create_from(client, f"s3://{s3_bucket}/files/{detail['fileId']}")
    assert own.status_code == 400
    # Other objects of the file store's bucket may be read, under its prefix too.
    s3.put_object(Bucket=s3_bucket, Key="files/imports/users.csv", Body=CSV)
    nearby = await create_from(client, f"s3://{s3_bucket}/files/imports/users.csv")
    assert nearby.status_code == 201, nearby.text
    small = await make(
        files_url=f"s3://{s3_bucket}/files2",
        s3_endpoint=aws_env,
        s3_region=S3_REGION,
        max_upload_bytes=10,
    )
    assert (await create_from(small, f"s3://{s3_bucket}/imports/2026/users.csv")).status_code == 413


# --- the client --------------------------------------------------------------------------


async def test_the_client_saves_mappings_and_submits_from_a_url(
    make: Make, server: SourceServer
) -> None:
    from bulkops.client import ApiError, AsyncClient

    server.files["/files/supplier.csv"] = b"Full Name,E-Mail\nAda,ada@example.com\n"
    http = await make(source_url_allow=f"{server.base}/files/")
    async with AsyncClient("http://bulkops.test", transport=http._transport) as client:  # type: ignore[arg-type]
        saved = await client.save_operation_mapping(
            "record", "supplier", {"Full Name": "name", "E-Mail": "email"}
        )
        assert saved.name == "supplier"
        assert [m.name for m in await client.get_operation_mappings("record")] == ["supplier"]
        assert (await client.get_operation_mapping("record", "supplier")).column_map == {
            "Full Name": "name",
            "E-Mail": "email",
        }
        url = f"{server.base}/files/supplier.csv"
        checked = await client.validate_bulk(
            "record", metadata={"requestedBy": "t"}, source_url=url, mapping="supplier"
        )
        assert checked.valid and checked.duplicate_of is None
        operation_id = await client.submit(
            "record", None, {"requestedBy": "t"}, source_url=url, mapping="supplier"
        )
        final = await client.wait(operation_id, poll_interval=0.02)
        assert final.status.value == "Completed"
        detail = await client.get_bulk(operation_id)
        assert detail.file_sha256 is not None and detail.file_name == "supplier.csv"
        again = await client.validate_bulk(
            "record", metadata={"requestedBy": "t"}, source_url=url, mapping="supplier"
        )
        assert again.duplicate_of == operation_id
        same = await client.get_bulks(file_sha256=detail.file_sha256)
        assert [o.id for o in same.items] == [operation_id]
        with pytest.raises(ApiError) as refused:
            await client.submit(
                "record",
                None,
                {"requestedBy": "t"},
                source_url=url,
                mapping="supplier",
                reject_duplicate=True,
            )
        assert refused.value.status_code == 409
        await client.delete_operation_mapping("record", "supplier")
        assert await client.get_operation_mappings("record") == []
