"""Routing through the gateway: by operation name, by owner (cached or found by fan-out),
by source, and the merged list."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.gateway import gateway_operations as gops
from tests.gateway.conftest import (
    BackendFactory,
    BackendServer,
    GatewayFactory,
    create,
    wait_finished,
    wait_until,
)


async def test_discovery_merges_every_backend_with_its_source_service(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    descriptors = (await gateway.get("/api/operations")).json()
    assert [(d["name"], d["sourceService"]) for d in descriptors] == [
        ("alpha-import", "a"),
        ("beta-approval", "b"),
        ("beta-import", "b"),
        ("gamma-import", "c"),
    ]
    # Otherwise each descriptor is the backend's own.
    async with trio[1].client() as direct:
        own = {d["name"]: d for d in (await direct.get("/api/operations")).json()}
    for descriptor in descriptors[1:3]:
        assert {k: v for k, v in descriptor.items() if k != "sourceService"} == own[
            descriptor["name"]
        ]


async def test_create_validate_and_template_go_to_the_backend_serving_the_name(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "GAMMA-import")  # names match case-insensitively
    a, b, c = trio
    assert c.faults.hits("/api/bulks", "POST") == 1
    assert a.faults.hits("/api/bulks", "POST") == b.faults.hits("/api/bulks", "POST") == 0
    async with c.client() as direct:
        detail = (await direct.get(f"/api/bulks/{operation_id}")).json()
    assert detail["operationName"] == "gamma-import" and detail["source"] == "service-c"

    valid = await gateway.post(
        "/api/bulks/validate",
        data={"operationName": "beta-import", "metadata": "{}"},
        files={"file": ("rows.csv", b"name\nx\n", "text/csv")},
    )
    assert valid.status_code == 200 and valid.json()["valid"] is True
    assert b.faults.hits("/api/bulks/validate", "POST") == 1

    template = await gateway.get("/api/operations/alpha-import/template")
    assert template.status_code == 200 and template.text == "name\r\n"
    assert template.headers["content-disposition"] == (
        'attachment; filename="alpha-import-template.csv"'
    )
    assert a.faults.hits("/api/operations/alpha-import/template") == 1


async def test_an_upload_passes_through_byte_for_byte_wherever_its_name_is(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    content = "name\n" + "".join(f"row-{i}\n" for i in range(30_000))  # several chunks
    # The operation name comes after the file part: the gateway must read past the file.
    boundary = "gateway-test-boundary"
    body = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="big.csv"\r\n'
        "Content-Type: text/csv\r\n\r\n"
        f"{content}\r\n"
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="metadata"\r\n\r\n{}\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="operationName"\r\n\r\nbeta-import\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    response = await gateway.post(
        "/api/bulks",
        content=body,
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    assert response.status_code == 201, response.text
    operation_id = response.json()["operationId"]
    assert response.headers["location"] == f"/api/bulks/{operation_id}"
    download = await gateway.get(f"/api/bulks/{operation_id}/file")
    assert download.content == content.encode()
    assert download.headers["content-disposition"] == 'attachment; filename="big.csv"'
    detail = (await gateway.get(f"/api/bulks/{operation_id}")).json()
    assert detail["fileSize"] == len(content) and detail["operationName"] == "beta-import"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "operationName is required"),
        ({"operationName": "  "}, "operationName is required"),
        ({"operationName": "delta-import"}, "Unknown operation 'delta-import'"),
    ],
)
async def test_create_without_a_known_name_is_refused_by_the_gateway(
    trio: list[BackendServer],
    make_gateway: GatewayFactory,
    data: dict[str, str],
    message: str,
) -> None:
    gateway = await make_gateway(trio)
    response = await gateway.post(
        "/api/bulks", data=data, files={"file": ("rows.csv", b"name\nx\n", "text/csv")}
    )
    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert all(b.faults.hits("/api/bulks", "POST") == 0 for b in trio)
    not_multipart = await gateway.post("/api/bulks/validate", data={"operationName": "x"})
    assert not_multipart.status_code == 400 and "multipart" in not_multipart.json()["error"]


async def test_a_cold_id_cache_fans_out_once_then_routes_directly(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    a, b, c = trio
    async with b.client() as direct:  # created behind the gateway's back: not cached
        operation_id = await create(direct, "beta-import")
        status = await wait_finished(direct, operation_id)
    gateway = await make_gateway(trio)
    path = f"/api/bulks/{operation_id}/status"
    first = await gateway.get(path)
    assert first.status_code == 200 and first.json() == status
    assert b.faults.hits(path) >= 1
    probed = [backend.faults.hits(path) for backend in trio]
    for suffix in ("", "/status", "/errors", "/rows", "/events"):
        assert (await gateway.get(f"/api/bulks/{operation_id}{suffix}")).status_code == 200
    # Cached now: only the owner is asked, the others never again.
    assert a.faults.hits(path) == probed[0] and c.faults.hits(path) == probed[2]
    assert b.faults.hits(path) == probed[1] + 1
    assert a.faults.hits(f"/api/bulks/{operation_id}/rows") == 0


async def test_an_id_unknown_everywhere_is_404_after_asking_every_backend(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    unknown = str(uuid.uuid4())
    response = await gateway.post(f"/api/bulks/{unknown}/cancel")
    assert response.status_code == 404
    assert response.json() == {"error": f"Operation {unknown} not found"}
    assert all(b.faults.hits(f"/api/bulks/{unknown}/status") == 1 for b in trio)
    assert all(b.faults.hits(f"/api/bulks/{unknown}/cancel", "POST") == 0 for b in trio)
    malformed = await gateway.get("/api/bulks/not-a-guid/export")
    assert malformed.status_code == 404
    assert malformed.json() == {"error": "Operation not-a-guid not found"}


async def test_id_routes_forward_verbs_bodies_and_downloads_to_the_owner(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "alpha-import", "name\nok\nfail-1\n")
    assert (await wait_finished(gateway, operation_id))["status"] == "CompletedWithErrors"
    export = await gateway.get(f"/api/bulks/{operation_id}/export", params={"format": "jsonl"})
    assert export.headers["content-disposition"] == (
        f'attachment; filename="operation-{operation_id}-report.jsonl"'
    )
    assert [line.count('"rowNumber"') for line in export.text.splitlines()] == [1, 1]
    eligibility = await gateway.get(f"/api/bulks/{operation_id}/retry/eligibility")
    assert eligibility.json() == {"isEligible": True}
    bad = await gateway.post(f"/api/bulks/{operation_id}/retry/rows", json={"rowNumbers": []})
    assert bad.status_code == 400 and "at least one" in bad.json()["error"]
    retried = await gateway.post(f"/api/bulks/{operation_id}/retry/rows", json={"rowNumbers": [2]})
    assert retried.json() == {"rowsSubmitted": 1, "rowsSkipped": 0}
    await wait_finished(gateway, operation_id)
    history = (await gateway.get(f"/api/bulks/{operation_id}/retry/history")).json()
    assert history["totalCount"] == 1 and history["items"][0]["rowNumber"] == 2
    wrong_verb = await gateway.delete(f"/api/bulks/{operation_id}")
    assert wrong_verb.status_code == 405 and "error" in wrong_verb.json()


async def test_signals_reach_the_waiting_rows_of_the_owner(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    operation_id = await create(gateway, "beta-approval", "name\nann@x.io\nbob\n")
    rows = f"/api/bulks/{operation_id}/rows"

    async def both_wait() -> bool:
        body = (await gateway.get(rows, params={"state": "WaitingForCompletion"})).json()
        return bool(body["totalCount"] == 2)

    await wait_until(both_wait, what="two waiting rows")
    approved = await gateway.post(f"/api/bulks/{operation_id}/signal/ann%40x.io")
    assert approved.status_code == 200 and approved.json()["rowNumber"] == 1
    refused = await gateway.post(
        f"/api/bulks/{operation_id}/signal/bob/fail", json={"errorMessage": "no"}
    )
    assert refused.json()["failed"] is True
    nobody = await gateway.post(f"/api/bulks/{operation_id}/signal/nobody")
    assert nobody.status_code == 404 and "nobody" in nobody.json()["error"]
    final = await wait_finished(gateway, operation_id)
    assert (final["status"], final["errorCount"]) == ("CompletedWithErrors", 1)


def _union_newest_first(items: list[dict[str, Any]]) -> list[str]:
    """The list order of an instance, computed independently: createdAt desc, then id."""
    by_id = sorted(items, key=lambda i: i["id"])
    ordered = sorted(by_id, key=lambda i: datetime.fromisoformat(i["createdAt"]), reverse=True)
    return [i["id"] for i in ordered]


async def _created_round_robin(backends: list[BackendServer], per_backend: int) -> None:
    clients = [b.client() for b in backends]
    try:
        for _ in range(per_backend):
            for backend, client in zip(backends, clients, strict=True):
                await create(client, gops.OPERATION_OF[backend.name])
    finally:
        for client in clients:
            await client.aclose()


async def _everything(backends: list[BackendServer]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for backend in backends:
        async with backend.client() as direct:
            items += (await direct.get("/api/bulks", params={"pageSize": 1000})).json()["items"]
    return items


@pytest.fixture
async def api_trio(make_backend: BackendFactory) -> list[BackendServer]:
    """Backends a, b, c that only store operations (nothing runs, so nothing changes)."""
    return [await make_backend(name, role="api") for name in ("a", "b", "c")]


async def test_page_ten_of_three_backends_is_the_same_page_of_their_union(
    api_trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    await _created_round_robin(api_trio, 20)
    union = _union_newest_first(await _everything(api_trio))
    assert len(union) == 60
    gateway = await make_gateway(api_trio)
    page = (await gateway.get("/api/bulks", params={"page": 10, "pageSize": 5})).json()
    assert [i["id"] for i in page["items"]] == union[45:50]
    assert (page["totalCount"], page["page"], page["pageSize"]) == (60, 10, 5)
    assert page["hasNextPage"] is True
    walked: list[str] = []
    for number in range(1, 14):
        body = (await gateway.get("/api/bulks", params={"page": number, "pageSize": 5})).json()
        walked += [i["id"] for i in body["items"]]
        assert body["hasNextPage"] is (number < 12)
    assert walked == union  # every operation once, in order
    filtered = (await gateway.get("/api/bulks", params={"operationName": "beta-import"})).json()
    assert filtered["totalCount"] == 20
    assert {i["operationName"] for i in filtered["items"]} == {"beta-import"}


async def test_beyond_the_prefix_bound_a_warning_is_logged(
    api_trio: list[BackendServer],
    make_gateway: GatewayFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _created_round_robin(api_trio, 8)
    union = _union_newest_first(await _everything(api_trio))
    gateway = await make_gateway(api_trio, list_prefix_bound=6)
    seen = [len(backend.faults.requests) for backend in api_trio]
    with caplog.at_level(logging.WARNING, logger="bulkops.gateway"):
        within = (await gateway.get("/api/bulks", params={"page": 2, "pageSize": 3})).json()
        assert "prefix bound" not in caplog.text
        await gateway.get("/api/bulks", params={"page": 3, "pageSize": 3})
    assert [i["id"] for i in within["items"]] == union[3:6]
    assert "prefix bound of 6 rows" in caplog.text and "incomplete" in caplog.text
    # No backend was asked for more than the bound.
    sizes = [
        int(httpx.QueryParams(query)["pageSize"])
        for backend, start in zip(api_trio, seen, strict=True)
        for _, path, query, _ in backend.faults.requests[start:]
        if path == "/api/bulks"
    ]
    assert sizes and max(sizes) <= 6


async def test_source_lists_one_backend_with_native_paging(
    api_trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    await _created_round_robin(api_trio, 4)
    gateway = await make_gateway(api_trio)
    a, b, c = api_trio
    before = [len(x.faults.requests) for x in (a, c)]
    through = await gateway.get("/api/bulks", params={"source": "b", "page": 2, "pageSize": 3})
    async with b.client() as direct:
        native = await direct.get("/api/bulks", params={"page": 2, "pageSize": 3})
    assert through.json() == native.json()
    assert [len(x.faults.requests) for x in (a, c)] == before  # no fan-out
    _, _, query, _ = b.faults.requests[-2]
    assert "source" not in query and "page=2" in query


async def test_an_unknown_source_is_logged_and_falls_back_to_every_backend(
    api_trio: list[BackendServer],
    make_gateway: GatewayFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _created_round_robin(api_trio, 2)
    gateway = await make_gateway(api_trio)
    with caplog.at_level(logging.WARNING, logger="bulkops.gateway"):
        fallback = await gateway.get("/api/bulks", params={"source": "nowhere"})
    assert "'nowhere' names no backend" in caplog.text
    everything = await gateway.get("/api/bulks")
    assert fallback.json() == everything.json()
    assert fallback.json()["totalCount"] == 6


async def test_a_query_every_backend_refuses_is_relayed(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio)
    bad = await gateway.get("/api/bulks", params={"from": "yesterday"})
    assert bad.status_code == 400 and "from" in bad.json()["error"]
    bad_page = await gateway.get("/api/bulks", params={"page": "x"})
    assert bad_page.status_code == 400 and "page" in bad_page.json()["error"]


async def test_an_unused_cache_entry_expires_and_the_owner_is_asked_for_again(
    trio: list[BackendServer], make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(trio, id_cache_ttl=0.3)
    operation_id = await create(gateway, "gamma-import")  # cached at create
    path = f"/api/bulks/{operation_id}/status"
    assert (await gateway.get(path)).status_code == 200
    assert trio[0].faults.hits(path) == 0  # routed from the cache: no fan-out
    await asyncio.sleep(0.6)  # time passes with no use: the entry expires
    assert (await gateway.get(path)).status_code == 200
    assert trio[0].faults.hits(path) == 1  # a fan-out found the owner again
