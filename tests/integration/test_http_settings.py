"""Settings that change HTTP behaviour: CORS, event store, OpenAPI switch."""

from __future__ import annotations

from tests.integration.conftest import ClientFactory, create_ok, runtime_of, wait_status


async def test_cors_allows_listed_origins_with_credentials(make_client: ClientFactory) -> None:
    client = await make_client(cors_origins=["https://app.example"])
    preflight = await client.options(
        "/api/bulks",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert preflight.headers["access-control-allow-credentials"] == "true"
    simple = await client.get("/api/bulks", headers={"Origin": "https://app.example"})
    assert "Content-Disposition" in simple.headers["access-control-expose-headers"]
    other = await client.get("/api/bulks", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


async def test_memory_event_store_serves_the_feed(make_client: ClientFactory) -> None:
    client = await make_client(event_store="memory")
    operation_id = await create_ok(client, "name,email\nAda,a@x.io\n")
    await wait_status(client, operation_id)
    events = (await client.get(f"/api/bulks/{operation_id}/events")).json()
    assert [e["type"] for e in events] == ["Created", "StatusChanged", "Completed"]
    assert [e["sequence"] for e in events] == [1, 2, 3]


async def test_openapi_can_be_turned_off(make_client: ClientFactory) -> None:
    client = await make_client(openapi_enabled=False)
    response = await client.get("/openapi/v1.json")
    assert response.status_code == 404 and "error" in response.json()


async def test_storage_outage_is_503_and_not_ready(make_client: ClientFactory) -> None:
    client = await make_client()
    database = runtime_of(client)._database
    assert database is not None
    await database.close()  # the database is gone from under the running app
    listing = await client.get("/api/bulks")
    assert listing.status_code == 503
    assert listing.json() == {"error": "Storage is unavailable; try again later"}
    ready = await client.get("/health/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "Unhealthy"
    assert (await client.get("/health/live")).status_code == 200


async def test_the_whole_flow_on_s3_file_storage(
    make_client: ClientFactory, aws_env: str, s3_bucket: str
) -> None:
    client = await make_client(
        files_url=f"s3://{s3_bucket}/uploads", s3_endpoint=aws_env, s3_region="us-east-1"
    )
    content = "name,email\nAda,a@x.io\nBob,bad\n"
    operation_id = await create_ok(client, content)
    status = await wait_status(client, operation_id)
    assert (status["status"], status["processedRows"], status["errorCount"]) == (
        "CompletedWithErrors",
        2,
        1,
    )
    download = await client.get(f"/api/bulks/{operation_id}/file")
    assert download.content == content.encode()
    export = await client.get(f"/api/bulks/{operation_id}/export?mode=data&state=failed")
    assert export.text.splitlines()[1].startswith("Bob,bad,")
