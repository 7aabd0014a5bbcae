"""Webhook notifications through the outbox, to a real receiver on loopback, on SQLite and
PostgreSQL: payload, headers and signature, retries, a hanging receiver, and the
notifications route."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from bulkops.channels.dispatcher import Dispatcher
from bulkops.channels.webhook import WebhookChannel
from tests.gateway.loopback import LoopbackServer
from tests.integration.conftest import (
    ClientFactory,
    create,
    create_ok,
    runtime_of,
    wait_status,
    wait_until,
)
from tests.receiver import Receiver

SECRET = "webhook-secret-for-tests"
MIXED_CSV = "name,email,age\nAda,ada@example.com,36\nBob,bob-at-example,3\n"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    options: dict[str, Any] = {"webhook_secret": SECRET}
    if request.param == "postgres":
        options.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    yield await make_client(**options)


async def serve(receiver: Receiver) -> AsyncIterator[str]:
    server = LoopbackServer(receiver.app())
    url = await server.start()
    try:
        yield f"{url}/hook"
    finally:
        await server.stop()


@pytest.fixture
async def receiver() -> Receiver:
    return Receiver()


@pytest.fixture
async def hook_url(receiver: Receiver) -> AsyncIterator[str]:
    async for url in serve(receiver):
        yield url


def notifications(target: str, *triggers: str) -> str:
    recipient: dict[str, Any] = {"channel": "webhook", "target": target}
    if triggers:
        recipient["triggers"] = list(triggers)
    return json.dumps({"recipients": [recipient]})


async def deliveries(client: httpx.AsyncClient, operation_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/bulks/{operation_id}/notifications")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()
    return found


async def test_a_completion_is_delivered_signed_with_the_operation(
    client: httpx.AsyncClient, receiver: Receiver, hook_url: str
) -> None:
    operation_id = await create_ok(
        client,
        MIXED_CSV,
        extra={"notifications": notifications(hook_url, "OnCompletionWithErrors", "OnFailure")},
    )
    await wait_status(client, operation_id)

    async def delivered() -> bool:
        return [d["state"] for d in await deliveries(client, operation_id)] == ["Delivered"]

    await wait_until(delivered, what="the delivery to be recorded as Delivered")
    (request,) = receiver.received
    body = json.loads(request.body)
    assert body["event"] == "Completed"
    assert body["operation"]["id"] == operation_id
    assert body["operation"]["status"] == "CompletedWithErrors"
    assert body["operation"]["errorCount"] == 1 and body["occurredAt"].endswith("Z")
    assert request.headers["bulkops-event"] == "Completed"
    expected = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.headers["bulkops-signature"] == f"sha256={expected}"
    (delivery,) = await deliveries(client, operation_id)
    assert request.headers["bulkops-delivery"] == delivery["id"]
    assert delivery["trigger"] == "OnCompletionWithErrors" and delivery["attempts"] == 1
    assert delivery["lastStatusCode"] == 200 and delivery["deliveredAt"]


async def test_triggers_not_asked_for_send_nothing(
    client: httpx.AsyncClient, receiver: Receiver, hook_url: str
) -> None:
    good = "name,email,age\nAda,ada@example.com,36\n"
    quiet = await create_ok(client, good, extra={"notifications": notifications(hook_url)})
    loud = await create_ok(
        client, good, extra={"notifications": notifications(hook_url, "OnStatusChange")}
    )
    await wait_status(client, quiet)
    await wait_status(client, loud)

    async def both_sent() -> bool:
        sent = await deliveries(client, loud)
        return len(sent) == 2 and all(d["state"] == "Delivered" for d in sent)

    await wait_until(both_sent, what="two status-change deliveries")
    assert await deliveries(client, quiet) == []  # default trigger OnFailure: it completed
    events = sorted(json.loads(r.body)["event"] for r in receiver.received)
    assert events == ["Completed", "StatusChanged"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"recipients": [{"channel": "pigeon", "target": "x"}]}', "Unknown notification channel"),
        (
            '{"recipients": [{"channel": "webhook", "target": "x", "triggers": ["OnLunch"]}]}',
            "OnLunch",
        ),
    ],
)
async def test_unknown_channels_and_triggers_are_a_400(
    client: httpx.AsyncClient, value: str, message: str
) -> None:
    response = await create(
        client,
        "name,email\nA,a@example.com\n",
        metadata={"requestedBy": "t"},
        extra={"notifications": value},
    )
    assert response.status_code == 400 and message in response.json()["error"]


async def test_retries_with_backoff_until_delivered_and_a_hanging_receiver_blocks_nothing(
    client: httpx.AsyncClient,
) -> None:
    runtime = runtime_of(client)
    flaky, hanging = Receiver(fail_first=2), Receiver(hang=True)
    flaky_server, hanging_server = LoopbackServer(flaky.app()), LoopbackServer(hanging.app())
    flaky_url = f"{await flaky_server.start()}/hook"
    hanging_url = f"{await hanging_server.start()}/hook"
    channel = WebhookChannel(secret=None, allow_private=True, timeout=2)
    try:
        started = time.monotonic()
        slow = notifications(hanging_url, "All")
        slow_ops = [
            await create_ok(client, MIXED_CSV, extra={"notifications": slow}) for _ in range(3)
        ]
        flaky_op = await create_ok(
            client, MIXED_CSV, extra={"notifications": notifications(flaky_url, "OnTerminal")}
        )
        for operation_id in (*slow_ops, flaky_op):
            await wait_status(client, operation_id)
        # Processing went on while deliveries hung: none waited for the 10 s timeout.
        assert time.monotonic() - started < 10
        await hanging.arrived.wait()
        # A dispatcher with a short backoff delivers the flaky one on its third try.
        dispatcher = Dispatcher(
            runtime.stores.operations,  # type: ignore[arg-type]
            {"webhook": channel},
            "test-dispatcher",
            first_delay=0.05,
        )

        async def delivered() -> bool:
            await dispatcher.send_due()
            found = await deliveries(client, flaky_op)
            return [d["state"] for d in found] == ["Delivered"]

        await wait_until(delivered, timeout=60, what="the flaky receiver's third answer")
        (delivery,) = await deliveries(client, flaky_op)
        assert delivery["attempts"] == 3 and len(flaky.received) == 3
        ids = {r.headers["bulkops-delivery"] for r in flaky.received}
        assert ids == {delivery["id"]}  # the same delivery, retried
    finally:
        await channel.aclose()
        hanging.release.set()
        await flaky_server.stop()
        await hanging_server.stop()
