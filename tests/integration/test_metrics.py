"""GET /metrics: Prometheus text with what the service did, parsed with prometheus-client's
own parser, under the read policy."""

from __future__ import annotations

import json
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import ClientFactory, create_ok, wait_status

MIXED_CSV = (
    "name,email,age\n"
    "Ada,ada@example.com,36\n"
    "Bob,bob-at-example,3\n"  # fails validation
    "boom,boom@example.com,1\n"  # fails processing
    "Dee,dee@example.com,\n"
)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def scrape(client: httpx.AsyncClient, **headers: str) -> dict[Any, float]:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


async def test_metrics_count_rows_operations_latencies_and_requests(
    make_client: ClientFactory,
) -> None:
    client = await make_client()
    operation_id = await create_ok(client, MIXED_CSV)
    await wait_status(client, operation_id)
    await client.get(f"/api/bulks/{operation_id}/status")

    found = await scrape(client)

    rows = "bulkops_rows_processed_total"
    assert found[(rows, (("operation", "record"), ("outcome", "completed")))] == 2
    assert found[(rows, (("operation", "record"), ("outcome", "failed")))] == 2
    assert found[("bulkops_operations", (("status", "CompletedWithErrors"),))] == 1
    assert found[("bulkops_operations", (("status", "Running"),))] == 0
    assert found[("bulkops_queue_depth", ())] == 0
    latency = ("bulkops_row_duration_seconds_count", (("operation", "record"),))
    assert found[latency] == 4  # every row, the failed ones too
    assert found[("bulkops_storage_write_seconds_count", ())] >= 1
    status_route = (("method", "GET"), ("route", "/api/bulks/{id}/status"), ("status", "200"))
    assert found[("bulkops_http_requests_total", status_route)] >= 1
    create_route = (("method", "POST"), ("route", "/api/bulks"), ("status", "201"))
    assert found[("bulkops_http_requests_total", create_route)] == 1


async def test_metrics_need_the_read_policy(make_client: ClientFactory) -> None:
    tokens = {"reader-secret-1": "read"}
    client = await make_client(auth_tokens=json.dumps(tokens))

    assert (await client.get("/metrics")).status_code == 401
    found = await scrape(client, authorization="Bearer reader-secret-1")

    # Refused before routing: counted, under the one label for requests no route saw.
    refused = (("method", "GET"), ("route", "unrouted"), ("status", "401"))
    assert found[("bulkops_http_requests_total", refused)] == 1
    served = (("method", "GET"), ("route", "/metrics"), ("status", "200"))
    assert ("bulkops_http_requests_total", served) not in found  # counted once it ends
