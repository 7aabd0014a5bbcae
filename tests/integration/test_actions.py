"""Bulk actions over HTTP on SQLite and PostgreSQL: preview, start, watch, skips with
reasons, cancel, the list, the actor of what they do, and tenant scope."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from bulkops.clock import utcnow
from bulkops.storage.actions import ActionKind, ActionRecord, ActionStatus
from tests.integration import restart_operations as rst
from tests.integration.auth_support import bearer
from tests.integration.conftest import (
    ClientFactory,
    create_ok,
    runtime_of,
    wait_status,
    wait_until,
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    rst.reset()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def options(request: pytest.FixtureRequest) -> dict[str, Any]:
    found: dict[str, Any] = {"step_retry_delay": 0, "action_rate": 1000}
    if request.param == "postgres":
        found.update(
            database_url=request.getfixturevalue("empty_postgres_url"), migrate_on_start=False
        )
    return found


@pytest.fixture
async def client(
    options: dict[str, Any], make_client: ClientFactory
) -> AsyncIterator[httpx.AsyncClient]:
    yield await make_client(rst.ALL, **options)


async def finished(client: httpx.AsyncClient, name: str, **headers: str) -> str:
    """An operation of one row named ``name`` (failing at "Send welcome" when it starts
    with x), run to its end."""
    if name.startswith("x"):
        rst.FAILURES[(name, "Send welcome")] = 1
    response = await client.post(
        "/api/bulks",
        data={"operationName": "keyed-steps", "metadata": "{}"},
        files={"file": ("rows.csv", f"name\n{name}\n".encode(), "text/csv")},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    operation_id = str(response.json()["operationId"])
    saved = httpx.Headers(client.headers)
    client.headers.update(headers)  # a secured service: wait with the creator's token
    try:
        await wait_status(client, operation_id)
    finally:
        client.headers = saved
    return operation_id


async def act(client: httpx.AsyncClient, body: dict[str, Any], **headers: str) -> httpx.Response:
    return await client.post("/api/actions", json=body, headers=headers)


async def wait_action(client: httpx.AsyncClient, action_id: str, **headers: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def ended() -> bool:
        found.update((await client.get(f"/api/actions/{action_id}", headers=headers)).json())
        return found.get("status") == "Completed"

    await wait_until(ended, what=f"action {action_id} to end")
    return found


async def test_bad_actions_are_refused(client: httpx.AsyncClient) -> None:
    for body in (
        {"action": "retry", "filter": {}},
        {"action": "retry", "filter": {"status": []}},
        {"action": "retry"},
        {"action": "delete", "filter": {"createdBy": "ada"}},
        {"action": "retry", "filter": {"status": ["Nope"]}},
        {"action": "retry", "filter": {"from": "yesterday"}},
        {"action": "retry", "filter": {"createdBy": "ada"}, "fromStep": "Hold"},
        {"action": "cancel", "filter": {"createdBy": "ada"}, "includeCompleted": True},
    ):
        response = await act(client, body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]
    assert (await client.post("/api/actions", content=b"nope")).status_code == 400
    assert (await client.get(f"/api/actions/{uuid.uuid4()}")).status_code == 404
    assert (await client.get("/api/actions/not-a-guid")).status_code == 404


async def test_preview_then_retry_acts_on_every_match_and_skips_with_reasons(
    client: httpx.AsyncClient,
) -> None:
    failing = [await finished(client, name) for name in ("x1", "x2", "x3")]
    fine = await finished(client, "ok")
    body = {"action": "retry", "filter": {"operationName": "keyed-steps"}, "reason": "API down"}

    preview = await act(client, {**body, "preview": True})
    assert preview.status_code == 200
    assert preview.json()["matched"] == 4
    assert set(preview.json()["operationIds"]) == {*failing, fine}
    assert (await client.get(f"/api/bulks/{failing[0]}")).json()["retryCount"] == 0

    started = await act(client, body)
    assert started.status_code == 202, started.text
    action = started.json()
    assert started.headers["location"] == f"/api/actions/{action['id']}"
    assert (action["action"], action["matched"], action["createdBy"]) == ("retry", 4, "anonymous")
    assert action["filter"] == {"operationName": "keyed-steps"}
    assert action["includeCompleted"] is False and action["reason"] == "API down"
    ended = await wait_action(client, action["id"])
    assert (ended["done"], ended["skipped"], ended["failed"]) == (3, 1, 0)
    assert ended["completedAt"]
    [skipped] = ended["items"]
    assert skipped["operationId"] == fine and skipped["outcome"] == "skipped"
    assert "CompletedWithErrors" in skipped["reason"]
    for operation_id in failing:
        final = await wait_status(client, operation_id)
        assert (final["status"], final["errorCount"]) == ("Completed", 0)
        events = (await client.get(f"/api/bulks/{operation_id}/events")).json()
        retried = [e for e in events if e["message"].startswith("Status changed from Completed")]
        assert [e["actor"] for e in retried] == ["anonymous"]

    listed = (await client.get("/api/actions")).json()
    assert listed["totalCount"] == 1 and listed["items"][0]["id"] == action["id"]
    assert "items" not in listed["items"][0]
    # Acting again finds nothing left to retry: every one is skipped, none acted on twice.
    again = (await act(client, {**body, "filter": {"ids": failing}})).json()
    ended = await wait_action(client, again["id"])
    assert (ended["done"], ended["skipped"]) == (0, 3)
    for operation_id in failing:
        assert (await client.get(f"/api/bulks/{operation_id}")).json()["retryCount"] == 1


async def test_a_restart_action_reruns_a_step_of_completed_operations(
    client: httpx.AsyncClient,
) -> None:
    done = [await finished(client, name) for name in ("a", "b")]
    rst.KEYS.clear()
    body = {
        "action": "restart",
        "filter": {"ids": done, "status": ["Completed"]},
        "fromStep": "Hold",
        "includeCompleted": True,
    }
    action = (await act(client, body)).json()
    assert (action["fromStep"], action["includeCompleted"]) == ("Hold", True)
    ended = await wait_action(client, action["id"])
    assert (ended["done"], ended["skipped"]) == (2, 0)
    for operation_id in done:
        await wait_status(client, operation_id)
    assert sorted(key.rsplit(":", 1)[1] for _, step, key in rst.KEYS) == ["r1", "r1"]
    unknown = (await act(client, {**body, "fromStep": "Nope"})).json()
    ended = await wait_action(client, unknown["id"])
    assert ended["skipped"] == 2 and "Unknown step" in ended["items"][0]["reason"]


async def test_cancel_stops_an_action_and_a_cancel_action_cancels(
    options: dict[str, Any], make_client: ClientFactory
) -> None:
    client = await make_client(rst.ALL, **{**options, "action_rate": 2})
    rst.HELD.update({"h1", "h2", "h3"})
    running = []
    try:
        for name in ("h1", "h2", "h3"):
            running.append(
                await create_ok(client, f"name\n{name}\n", operation="keyed-steps", metadata={})
            )
        for operation_id in running:
            await wait_status(client, operation_id, {"Running"})
        action = (await act(client, {"action": "cancel", "filter": {"ids": running}})).json()

        async def first_cancelled() -> bool:
            body = (await client.get(f"/api/actions/{action['id']}")).json()
            return bool(body["done"] >= 1)

        await wait_until(first_cancelled, what="the first cancel")
        stopped = await client.post(f"/api/actions/{action['id']}/cancel")
        assert stopped.status_code == 200 and stopped.json()["status"] == "Cancelled"
        assert (await client.post(f"/api/actions/{action['id']}/cancel")).status_code == 409
        ended = (await client.get(f"/api/actions/{action['id']}")).json()
        assert ended["status"] == "Cancelled" and ended["done"] < 3
        statuses = [
            (await client.get(f"/api/bulks/{op}/status")).json()["status"] for op in running
        ]
        assert statuses.count("Cancelled") == ended["done"]
    finally:
        rst.RELEASED.set()


async def test_a_tenant_acts_only_on_its_own_operations(
    options: dict[str, Any], make_client: ClientFactory
) -> None:
    tokens = {
        "acme": {"role": "operate", "name": "alice", "tenant": "acme"},
        "globex": {"role": "operate", "name": "bob", "tenant": "globex"},
    }
    client = await make_client(rst.ALL, **{**options, "auth_tokens": json.dumps(tokens)})
    mine = await finished(client, "x-acme", **bearer("acme"))
    theirs = await finished(client, "x-globex", **bearer("globex"))
    body = {"action": "retry", "filter": {"ids": [mine, theirs]}}
    preview = (await act(client, {**body, "preview": True}, **bearer("acme"))).json()
    assert preview == {"matched": 1, "operationIds": [mine]}
    action = (await act(client, body, **bearer("acme"))).json()
    assert action["createdBy"] == "alice"
    await wait_action(client, action["id"], **bearer("acme"))
    events = (await client.get(f"/api/bulks/{mine}/events", headers=bearer("acme"))).json()
    assert "alice" in {e["actor"] for e in events}
    assert (await client.get(f"/api/bulks/{theirs}", headers=bearer("globex"))).json()[
        "retryCount"
    ] == 0
    assert (
        await client.get(f"/api/actions/{action['id']}", headers=bearer("globex"))
    ).status_code == 404
    assert (await client.get("/api/actions", headers=bearer("globex"))).json()["totalCount"] == 0
    cancel = await client.post(f"/api/actions/{action['id']}/cancel", headers=bearer("globex"))
    assert cancel.status_code == 404


async def test_an_operation_acted_on_before_its_runner_died_is_not_acted_on_again(
    options: dict[str, Any], make_client: ClientFactory
) -> None:
    """A runner that acted on an operation and died before recording it: the runner that
    takes the action over records it done (the act stamped the operation) and acts on
    the rest, each once."""
    client = await make_client(rst.ALL, **{**options, "abandon_after": 1.5})
    first, second = [await finished(client, name) for name in ("x1", "x2")]
    runtime = runtime_of(client)
    now = utcnow()
    record = ActionRecord(
        id=uuid.uuid4(),
        action=ActionKind.RETRY,
        filter={"ids": [first, second]},
        status=ActionStatus.RUNNING,
        matched=2,
        created_by="ada",
        created_at=now,
        runner="a-runner-that-died",
        heartbeat_at=now,
    )
    await runtime.actions._actions.add_action(record, [uuid.UUID(first), uuid.UUID(second)])
    # What the dead runner did: the act on the first operation, without its record.
    await runtime.retries.retry(uuid.UUID(first), actor="ada", action_id=record.id)
    ended = await wait_action(client, str(record.id))
    assert (ended["done"], ended["skipped"], ended["failed"]) == (2, 0, 0), ended
    for operation_id in (first, second):
        await wait_status(client, operation_id)
        detail = (await client.get(f"/api/bulks/{operation_id}")).json()
        assert (detail["status"], detail["retryCount"]) == ("Completed", 1)
    history = (await client.get(f"/api/bulks/{first}/retry/history")).json()
    assert history["totalCount"] == 1
