"""Tenants: a principal with a tenant finds no trace of another tenant's operations through
any route, and one tenant cannot hold every slot."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from typing import Any

import httpx
import pytest

import bulkops as bo
from bulkops.api.auth import AuthConfigurationError
from bulkops.client import AsyncClient, Event
from bulkops.storage.records import OperationQuery
from tests.integration import tenant_resolvers
from tests.integration.auth_support import SECRET, bearer, hs256
from tests.integration.conftest import ClientFactory, create, create_ok, runtime_of, wait_status
from tests.integration.operations import ALL

ACME, ACME_READER, GLOBEX, ADMIN = "acme-operate", "acme-read", "globex-operate", "admin-operate"
TOKENS = {
    ACME: {"role": "operate", "name": "alice", "tenant": "acme"},
    ACME_READER: {"role": "read", "name": "ann", "tenant": "acme"},
    GLOBEX: {"role": "operate", "name": "bob", "tenant": "globex"},
    ADMIN: {"role": "operate", "name": "root"},
}
# Completed with errors: one row fails validation, one fails processing (retryable).
ROWS = "name,email\nann,ann@acme.test\nboom,boom@acme.test\nbad,not-an-email\n"
SECRET_FILE = "acme-payroll.csv"
VALID = "name,email\nann,ann@acme.test\n"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def service(request: pytest.FixtureRequest, make_client: ClientFactory) -> httpx.AsyncClient:
    """A secured service with two tenants' tokens and an unscoped admin token."""
    overrides: dict[str, Any] = {"auth_tokens": json.dumps(TOKENS)}
    if request.param == "postgres":
        overrides.update(database_url=request.getfixturevalue("empty_postgres_url"))
        overrides.update(migrate_on_start=False)
    return await make_client(**overrides)


async def create_as(
    client: httpx.AsyncClient, token: str, content: str = ROWS, **kwargs: Any
) -> httpx.Response:
    """POST /api/bulks with ``token``."""
    data = {"operationName": "record", "metadata": json.dumps({"requestedBy": "tests"})}
    return await client.post(
        "/api/bulks",
        data=data,
        files={"file": (kwargs.get("file_name", "rows.csv"), content.encode(), "text/csv")},
        headers=bearer(token),
    )


async def finished_operation(client: httpx.AsyncClient, token: str, file_name: str) -> str:
    created = await create_as(client, token, file_name=file_name)
    assert created.status_code == 201, created.text
    operation_id = str(created.json()["operationId"])
    client.headers.update(bearer(token))
    try:
        status = await wait_status(client, operation_id)
    finally:
        del client.headers["Authorization"]
    assert status["status"] == "CompletedWithErrors"
    return operation_id


def _value(parameter: dict[str, Any], operation_id: str) -> str:
    if parameter["name"] == "id":
        return operation_id
    schema = parameter.get("schema", {})
    kinds = {schema.get("type"), *(s.get("type") for s in schema.get("anyOf", []))}
    return "1" if "integer" in kinds else "key"


def _requests(document: dict[str, Any], operation_id: str) -> list[tuple[str, str, list[str]]]:
    """Every (method, path, path parameter names) of the description, parameters filled."""
    found = []
    for template, item in document["paths"].items():
        for method, operation in item.items():
            parameters = {
                p["name"]: p for p in operation.get("parameters", []) if p.get("in") == "path"
            }
            names = re.findall(r"{(\w+)(?::\w+)?}", template)
            path = template
            for name in names:
                value = _value(parameters.get(name, {"name": name}), operation_id)
                path = re.sub(r"{" + name + r"(?::\w+)?}", value, path)
            found.append((method.upper(), path, names))
    return found


# Whatever a body route reads: row numbers to retry, a failure message, a fixed row.
ANY_BODY = {"rowNumbers": [2], "errorMessage": "stolen", "rowData": {"name": "x", "email": "y"}}


async def test_every_route_hides_another_tenants_operation(service: httpx.AsyncClient) -> None:
    acme_id = await finished_operation(service, ACME, SECRET_FILE)
    globex_id = await finished_operation(service, GLOBEX, "globex.csv")
    document = (await service.get("/openapi/v1.json")).json()
    before = (await service.get(f"/api/bulks/{acme_id}", headers=bearer(ADMIN))).json()
    walked = _requests(document, acme_id)
    assert sum("id" in names for _, _, names in walked) >= 15
    for method, path, names in walked:
        if "id" not in names or path.startswith("/api/actions/"):  # those name actions
            continue
        answer = await service.request(method, path, json=ANY_BODY, headers=bearer(GLOBEX))
        assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
        assert answer.json() == {"error": f"Operation {acme_id} not found"}, (method, path)
        if method == "GET" and names == ["id"]:
            # The same request with acme's own token finds it: the id is real.
            own = await service.request(method, path, headers=bearer(ACME))
            assert own.status_code == 200, (path, own.status_code, own.text)
    after = (await service.get(f"/api/bulks/{acme_id}", headers=bearer(ADMIN))).json()
    assert after == before  # nothing globex sent changed acme's operation
    # Routes of no one operation (lists, feeds, metrics, discovery) show globex nothing of
    # acme: not its id, not its file, not its tenant's name.
    for method, path, names in walked:
        if method != "GET" or names:
            continue
        answer = await service.get(path, headers=bearer(GLOBEX))
        assert answer.status_code == 200, (path, answer.text)
        for trace in (acme_id, SECRET_FILE, "acme"):
            assert trace not in answer.text, (path, trace)
    own_list = (await service.get("/api/bulks", headers=bearer(GLOBEX))).json()
    assert [item["id"] for item in own_list["items"]] == [globex_id]
    assert own_list["items"][0]["tenant"] == "globex"


async def test_lists_and_feeds_leave_other_tenants_out(service: httpx.AsyncClient) -> None:
    acme_id = await finished_operation(service, ACME, SECRET_FILE)
    globex_id = await finished_operation(service, GLOBEX, "globex.csv")

    async def listed(token: str) -> list[str]:
        body = (await service.get("/api/bulks", headers=bearer(token))).json()
        return sorted(item["id"] for item in body["items"])

    assert await listed(ACME) == await listed(ACME_READER) == [acme_id]
    assert await listed(GLOBEX) == [globex_id]
    assert await listed(ADMIN) == sorted([acme_id, globex_id])  # unscoped: everything
    detail = (await service.get(f"/api/bulks/{acme_id}", headers=bearer(ACME_READER))).json()
    assert detail["tenant"] == "acme" and detail["createdBy"] == "alice"
    for query in ({}, {"since": 0}, {"since": 0, "limit": 1000}):
        for token, own in ((ACME, acme_id), (GLOBEX, globex_id)):
            events = (await service.get("/api/events", params=query, headers=bearer(token))).json()
            assert events and {e["operationId"] for e in events} == {own}, (token, query)
    mine = (await service.get("/api/events", params={"since": 0}, headers=bearer(ACME))).json()
    types = {e["type"] for e in mine}
    assert {"Created", "StatusChanged", "RowFailed", "Completed"} <= types  # row events too
    every = (await service.get("/api/events", params={"since": 0}, headers=bearer(ADMIN))).json()
    assert {e["operationId"] for e in every} == {acme_id, globex_id}


async def test_following_the_feed_shows_only_the_callers_tenant(
    service: httpx.AsyncClient,
) -> None:
    # What `bulkops events --follow` does: the client's follow_events over the same app.
    globex_id = await finished_operation(service, GLOBEX, "globex.csv")
    transport = service._transport  # the app's ASGI transport
    async with AsyncClient(str(service.base_url), token=ACME, transport=transport) as client:
        seen: list[Event] = []
        follower = client.follow_events(since=0, poll_interval=0.02)
        acme_id = await finished_operation(service, ACME, SECRET_FILE)
        async for event in follower:
            seen.append(event)
            if event.type == "Completed":
                break
        await follower.aclose()
    assert {str(e.operation_id) for e in seen} == {acme_id}
    assert globex_id not in {str(e.operation_id) for e in seen}


async def test_metrics_of_a_scoped_reader_count_its_tenant_only(
    service: httpx.AsyncClient,
) -> None:
    await finished_operation(service, ACME, SECRET_FILE)
    await finished_operation(service, ACME, "second.csv")
    await finished_operation(service, GLOBEX, "globex.csv")

    def done(text: str) -> float:
        line = 'bulkops_operations{status="CompletedWithErrors"} '
        return float(next(x for x in text.splitlines() if x.startswith(line)).split()[-1])

    assert done((await service.get("/metrics", headers=bearer(ADMIN))).text) == 3
    assert done((await service.get("/metrics", headers=bearer(ACME_READER))).text) == 2
    assert done((await service.get("/metrics", headers=bearer(GLOBEX))).text) == 1


def test_metrics_series_labelled_with_another_tenant_are_left_out() -> None:
    from prometheus_client import Counter

    from bulkops.observability.metrics import Metrics

    metrics = Metrics()
    # A series some part of the service labels by tenant (fair sharing's, say).
    counter = Counter("bulkops_tenant_rows", "Rows", ["tenant"], registry=metrics.registry)
    counter.labels("acme").inc()
    counter.labels("globex").inc()
    scoped = metrics.render({}, "globex").decode()
    assert 'tenant="globex"' in scoped and "acme" not in scoped
    assert 'tenant="acme"' in metrics.render({}).decode()


async def test_a_scoped_caller_creates_for_its_own_tenant_only(
    service: httpx.AsyncClient,
) -> None:
    created = await create_as(service, GLOBEX)
    operation_id = created.json()["operationId"]
    listed = (await service.get("/api/bulks", headers=bearer(GLOBEX))).json()["items"]
    assert [(i["id"], i["tenant"], i["createdBy"]) for i in listed] == [
        (operation_id, "globex", "bob")
    ]
    admin = (await create_as(service, ADMIN)).json()["operationId"]
    detail = (await service.get(f"/api/bulks/{admin}", headers=bearer(ADMIN))).json()
    assert "tenant" not in detail  # unscoped: no tenant, omitted
    # An operation without a tenant is no tenant's: scoped callers do not see it.
    hidden = await service.get(f"/api/bulks/{admin}", headers=bearer(GLOBEX))
    assert hidden.status_code == 404


async def test_the_caller_route_says_who_is_calling(service: httpx.AsyncClient) -> None:
    assert (await service.get("/api/me", headers=bearer(ACME_READER))).json() == {
        "name": "ann",
        "tenant": "acme",
    }
    assert (await service.get("/api/me", headers=bearer(ADMIN))).json() == {"name": "root"}
    assert (await service.get("/api/me")).status_code == 401


async def test_without_credentials_everything_is_seen_as_before(
    make_client: ClientFactory,
) -> None:
    client = await make_client()
    first = await create_ok(client, ROWS)
    second = await create_ok(client, ROWS)
    listed = (await client.get("/api/bulks")).json()["items"]
    assert sorted(i["id"] for i in listed) == sorted([first, second])
    assert all("tenant" not in item for item in listed)
    assert (await client.get("/api/me")).json() == {}


async def test_the_jwt_tenant_claim_scopes_the_caller(make_client: ClientFactory) -> None:
    client = await make_client(auth_jwt_secret=SECRET, auth_jwt_tenant_claim="org")
    acme, globex = bearer(hs256(org="acme")), bearer(hs256(sub="bob", org="globex"))
    client.headers.update(acme)
    operation_id = await create_ok(client, ROWS)
    del client.headers["Authorization"]
    detail = (await client.get(f"/api/bulks/{operation_id}", headers=acme)).json()
    assert detail["tenant"] == "acme" and detail["createdBy"] == "alice"
    assert (await client.get(f"/api/bulks/{operation_id}", headers=globex)).status_code == 404
    unscoped = bearer(hs256(sub="root"))
    assert (await client.get(f"/api/bulks/{operation_id}", headers=unscoped)).status_code == 200
    # A claim that is there but no tenant is refused, never read as "every tenant".
    for bad in (42, "", ["acme"]):
        refused = await client.get("/api/bulks", headers=bearer(hs256(org=bad)))
        assert refused.status_code == 401, bad
        assert "'org' claim" in refused.json()["error"]


async def test_a_resolver_names_the_tenant_of_callers_whose_credential_names_none(
    make_client: ClientFactory,
) -> None:
    tokens = {"carol-token": {"role": "operate", "name": "carol"}, **TOKENS}
    client = await make_client(
        auth_tokens=json.dumps(tokens),
        tenant_resolver="tests.integration.tenant_resolvers:by_name",
    )
    tenant_resolvers.CALLS.clear()
    created = await create_as(client, "carol-token")
    operation_id = created.json()["operationId"]
    detail = (await client.get(f"/api/bulks/{operation_id}", headers=bearer(ADMIN))).json()
    assert detail["tenant"] == "initech"
    assert (await client.get(f"/api/bulks/{operation_id}", headers=bearer(ACME))).status_code == 404
    # The credential's own tenant comes first: the resolver is not asked for acme.
    assert "alice" not in tenant_resolvers.CALLS and "carol" in tenant_resolvers.CALLS


async def test_a_resolver_works_without_credentials(make_client: ClientFactory) -> None:
    client = await make_client(tenant_resolver="tests.integration.tenant_resolvers:by_header")
    client.headers["X-Tenant"] = "acme"
    operation_id = await create_ok(client, ROWS)
    assert (await client.get(f"/api/bulks/{operation_id}")).json()["tenant"] == "acme"
    other = await client.get(f"/api/bulks/{operation_id}", headers={"X-Tenant": "globex"})
    assert other.status_code == 404


@pytest.mark.parametrize(
    ("resolver", "problem"),
    [("raising", "raised ConnectionError"), ("not_a_string", "returned 42")],
)
async def test_a_failing_resolver_is_a_500_logged_once(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture, resolver: str, problem: str
) -> None:
    client = await make_client(
        auth_tokens=json.dumps(TOKENS),
        tenant_resolver=f"tests.integration.tenant_resolvers:{resolver}",
    )
    caplog.set_level(logging.DEBUG, logger="bulkops.auth")
    caplog.clear()
    for _ in range(3):
        listed = await client.get("/api/bulks", headers=bearer(ADMIN))
        assert listed.status_code == 500
        assert "tenant resolver (BULKOPS_TENANT_RESOLVER) failed" in listed.json()["error"]
        created = await create_as(client, ADMIN)
        assert created.status_code == 500
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1, [r.getMessage() for r in logged]
    assert problem in logged[0].getMessage() and resolver in logged[0].getMessage()
    stored = await runtime_of(client).queries.list(OperationQuery())
    assert stored.total_count == 0  # refused before anything was stored
    # A credential that names its tenant does not need the resolver.
    assert (await client.get("/api/bulks", headers=bearer(ACME))).status_code == 200


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.integration.tenant_resolvers:missing", "Cannot load the tenant resolver"),
        ("tests.integration.tenant_resolvers:NOT_CALLABLE", "is not callable"),
        ("tests.no_such_module:resolve", "Cannot load the tenant resolver"),
    ],
)
def test_a_resolver_that_cannot_be_loaded_stops_the_start(spec: str, message: str) -> None:
    with pytest.raises(AuthConfigurationError, match=message):
        bo.create_app(ALL, bo.Settings(tenant_resolver=spec))


async def test_max_active_is_per_tenant_with_retry_after(make_client: ClientFactory) -> None:
    # An API-only instance leaves operations Pending: they stay active.
    client = await make_client(auth_tokens=json.dumps(TOKENS), tenant_max_active=2, role="api")
    first = await create_as(client, ACME)
    await create_as(client, ACME)
    refused = await create_as(client, ACME)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    body = refused.json()
    assert "BULKOPS_TENANT_MAX_ACTIVE=2" in body["error"] and "'acme'" in body["error"]
    assert body["limit"] == 2 and body["active"] == 2
    # Other tenants (and unscoped creators, counted by creator) are not affected.
    assert (await create_as(client, GLOBEX)).status_code == 201
    assert (await create_as(client, ADMIN)).status_code == 201
    # A finished operation frees its slot.
    operation_id = first.json()["operationId"]
    cancelled = await client.post(f"/api/bulks/{operation_id}/cancel", headers=bearer(ACME))
    assert cancelled.status_code == 200
    assert (await create_as(client, ACME)).status_code == 201
    assert (await create_as(client, ACME)).status_code == 429
    listed = (await client.get("/api/bulks", headers=bearer(ACME))).json()
    assert listed["totalCount"] == 3  # the refused creates stored nothing


async def test_max_active_counts_untenanted_creators_apart(make_client: ClientFactory) -> None:
    client = await make_client(tenant_max_active=1, role="api")
    assert (await create(client, ROWS, metadata={"requestedBy": "t"})).status_code == 201
    refused = await create(client, ROWS, metadata={"requestedBy": "t"})
    assert refused.status_code == 429 and "'anonymous'" in refused.json()["error"]
    named = await create(client, ROWS, metadata={"requestedBy": "t"}, extra={"createdBy": "eve"})
    assert named.status_code == 201


async def test_an_idempotent_replay_is_not_refused_by_the_limit(
    make_client: ClientFactory,
) -> None:
    client = await make_client(auth_tokens=json.dumps(TOKENS), tenant_max_active=1, role="api")
    key = {"Idempotency-Key": str(uuid.uuid4())}
    data = {"operationName": "record", "metadata": json.dumps({"requestedBy": "tests"})}
    files = {"file": ("rows.csv", ROWS.encode(), "text/csv")}
    headers = {**bearer(ACME), **key}
    first = await client.post("/api/bulks", data=data, files=files, headers=headers)
    again = await client.post("/api/bulks", data=data, files=files, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()


async def test_an_idempotency_key_never_replays_another_tenants_operation(
    make_client: ClientFactory,
) -> None:
    # Two tenants each have an "alice": the key is hers within her tenant only.
    tokens = {
        "acme-alice": {"role": "operate", "name": "alice", "tenant": "acme"},
        "globex-alice": {"role": "operate", "name": "alice", "tenant": "globex"},
    }
    client = await make_client(auth_tokens=json.dumps(tokens))
    data = {"operationName": "record", "metadata": json.dumps({"requestedBy": "tests"})}
    files = {"file": ("rows.csv", ROWS.encode(), "text/csv")}
    key = {"Idempotency-Key": "same-key"}
    acme = await client.post(
        "/api/bulks", data=data, files=files, headers={**bearer("acme-alice"), **key}
    )
    globex = await client.post(
        "/api/bulks", data=data, files=files, headers={**bearer("globex-alice"), **key}
    )
    assert acme.status_code == globex.status_code == 201
    assert "Idempotent-Replayed" not in globex.headers
    assert globex.json()["operationId"] != acme.json()["operationId"]


async def test_chunked_operations_keep_their_tenant_in_every_event(
    make_client: ClientFactory,
) -> None:
    client = await make_client(auth_tokens=json.dumps(TOKENS), chunk_rows=2, row_helpers=1)
    rows = "name,email\n" + "".join(f"p{i},{'bad' if i % 3 else 'ok@x'}\n" for i in range(9))
    created = await create_as(client, ACME, rows)
    operation_id = created.json()["operationId"]
    client.headers.update(bearer(ACME))
    assert (await wait_status(client, operation_id))["status"] == "CompletedWithErrors"
    mine = (await client.get("/api/events", params={"since": 0})).json()
    assert sum(e["type"] == "RowFailed" for e in mine) == 6
    theirs = (await client.get("/api/events", params={"since": 0}, headers=bearer(GLOBEX))).json()
    assert theirs == []


async def test_the_default_jwt_claim_is_tenant(make_client: ClientFactory) -> None:
    client = await make_client(auth_jwt_secret=SECRET)
    acme = bearer(hs256(tenant="acme"))
    assert (await client.get("/api/me", headers=acme)).json() == {"name": "alice", "tenant": "acme"}
    other = bearer(hs256(org="acme"))  # another claim names no tenant: unscoped
    assert (await client.get("/api/me", headers=other)).json() == {"name": "alice"}


async def test_file_hashes_never_reveal_another_tenants_operation(
    service: httpx.AsyncClient,
) -> None:
    digest = hashlib.sha256(VALID.encode()).hexdigest()
    data = {"operationName": "record", "metadata": json.dumps({"requestedBy": "tests"})}

    async def post(path: str, token: str, **extra: str) -> httpx.Response:
        files = {"file": ("rows.csv", VALID.encode(), "text/csv")}
        return await service.post(path, data={**data, **extra}, files=files, headers=bearer(token))

    async def same_file(token: str) -> list[str]:
        params = {"fileSha256": digest}
        body = (await service.get("/api/bulks", params=params, headers=bearer(token))).json()
        return [item["id"] for item in body["items"]]

    acme = await post("/api/bulks", ACME, rejectDuplicate="true")
    assert acme.status_code == 201, acme.text
    acme_id = acme.json()["operationId"]
    for token in (GLOBEX, ADMIN):  # admin's own operations have no tenant
        checked = await post("/api/bulks/validate", token)
        assert checked.status_code == 200, checked.text
        assert "duplicateOf" not in checked.json(), token
    assert await same_file(GLOBEX) == []
    globex = await post("/api/bulks", GLOBEX, rejectDuplicate="true")
    assert globex.status_code == 201, globex.text  # acme's upload is no duplicate of globex's
    globex_id = globex.json()["operationId"]
    assert await same_file(ACME) == await same_file(ACME_READER) == [acme_id]
    assert await same_file(GLOBEX) == [globex_id]
    assert sorted(await same_file(ADMIN)) == sorted([acme_id, globex_id])  # unscoped
    refused = await post("/api/bulks", GLOBEX, rejectDuplicate="true")
    assert refused.status_code == 409 and refused.json()["duplicateOf"] == globex_id
    assert acme_id not in refused.text
    validated = (await post("/api/bulks/validate", ACME)).json()
    assert validated["duplicateOf"] == acme_id


async def test_a_reject_duplicate_replay_is_the_callers_own_within_its_tenant(
    make_client: ClientFactory,
) -> None:
    # Two tenants each have an "alice" sending one file under one key with rejectDuplicate.
    tokens = {
        "acme-alice": {"role": "operate", "name": "alice", "tenant": "acme"},
        "globex-alice": {"role": "operate", "name": "alice", "tenant": "globex"},
    }
    client = await make_client(auth_tokens=json.dumps(tokens))
    data = {
        "operationName": "record",
        "metadata": json.dumps({"requestedBy": "tests"}),
        "rejectDuplicate": "true",
    }

    async def send(token: str) -> httpx.Response:
        files = {"file": ("rows.csv", ROWS.encode(), "text/csv")}
        headers = {**bearer(token), "Idempotency-Key": "same-key"}
        return await client.post("/api/bulks", data=data, files=files, headers=headers)

    acme, globex = await send("acme-alice"), await send("globex-alice")
    assert acme.status_code == globex.status_code == 201, (acme.text, globex.text)
    assert "Idempotent-Replayed" not in globex.headers
    again = await send("globex-alice")
    assert again.status_code == 201, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["operationId"] == globex.json()["operationId"]
