"""Custom read/operate policies and the replaceable user resolver."""

from __future__ import annotations

import json

import pytest
from starlette.requests import Request

import bulkops as bo
from bulkops.api.auth import AuthConfigurationError, principal_of
from tests.integration import auth_policies
from tests.integration.auth_support import OPERATE_TOKEN, READ_TOKEN, bearer
from tests.integration.conftest import ClientFactory
from tests.integration.test_auth_tokens import created_by, submit

POLICIES = "tests.integration.auth_policies"
BLUE = {"X-Team": "blue"}


@pytest.fixture(autouse=True)
def _forget_calls() -> None:
    auth_policies.SEEN.clear()


async def test_a_read_policy_alone_governs_operate_too(make_client: ClientFactory) -> None:
    client = await make_client(read_policy=f"{POLICIES}:blue_team")
    assert (await client.get("/api/bulks")).status_code == 401
    assert (await client.get("/api/bulks", headers=BLUE)).status_code == 200
    assert auth_policies.SEEN[-1] == (None, "/api/bulks")  # no bearer credentials: None
    # SPEC: the operate policy falls back to the read policy when omitted.
    denied = await submit(client, None)
    assert denied.status_code == 401 and denied.headers["WWW-Authenticate"] == "Bearer"
    client.headers.update(BLUE)
    allowed = await submit(client, None, created_by="mallory")
    # A policy is configured, so the form value does not name the creator.
    assert await created_by(client, allowed) == "anonymous"
    assert (await client.get("/health/live", headers={})).status_code == 200


async def test_async_operate_policy_leaves_reads_open(make_client: ClientFactory) -> None:
    client = await make_client(operate_policy=f"{POLICIES}:async_blue_team")
    assert (await client.get("/api/bulks")).status_code == 200
    assert (await submit(client, None)).status_code == 401
    client.headers.update(BLUE)
    assert (await submit(client, None)).status_code == 201


async def test_policies_see_the_principal_and_replace_the_role_check(
    make_client: ClientFactory,
) -> None:
    tokens = {
        READ_TOKEN: "read",
        OPERATE_TOKEN: "operate",
        "bot-token-0123456789": {"role": "read", "name": "ci-bot"},
    }
    client = await make_client(
        auth_tokens=json.dumps(tokens), operate_policy=f"{POLICIES}:only_ci_bot"
    )
    # Reads keep the built-in role check; operate asks the custom policy.
    assert (await client.get("/api/bulks", headers=bearer(READ_TOKEN))).status_code == 200
    assert (await submit(client, OPERATE_TOKEN)).status_code == 403
    response = await submit(client, "bot-token-0123456789")
    assert await created_by(client, response) == "ci-bot"
    assert (await client.get("/api/bulks", headers=bearer("nope"))).status_code == 401


@pytest.mark.parametrize(
    "spec", [f"{POLICIES}:missing", f"{POLICIES}:NOT_CALLABLE", "no_such_module_xyz:policy"]
)
def test_a_policy_that_cannot_be_loaded_stops_the_start(spec: str) -> None:
    with pytest.raises(AuthConfigurationError, match="policy"):
        bo.create_app(settings=bo.Settings(database_url="memory://", read_policy=spec))


def test_a_malformed_policy_name_is_a_settings_error() -> None:
    with pytest.raises(ValueError, match="read_policy"):
        bo.Settings(read_policy="not a module path")


async def test_user_resolver_names_the_creator(make_client: ClientFactory) -> None:
    def from_header(request: Request) -> str | None:
        principal = principal_of(request)
        team = request.headers.get("x-team")
        return f"{team}:{principal.name}" if team and principal else None

    client = await make_client(
        auth_tokens=json.dumps({OPERATE_TOKEN: {"role": "operate", "name": "ops"}}),
        user_resolver=from_header,
    )
    response = await client.post(
        "/api/bulks",
        data={
            "operationName": "record",
            "metadata": '{"requestedBy": "t"}',
            "createdBy": "mallory",
        },
        files={"file": ("rows.csv", b"name,email\nAda,a@x.io\n", "text/csv")},
        headers={**bearer(OPERATE_TOKEN), **BLUE},
    )
    assert await created_by(client, response) == "blue:ops"
    # The resolver answers None: the principal's own name.
    assert await created_by(client, await submit(client, OPERATE_TOKEN, "mallory")) == "ops"


async def test_async_user_resolver_without_policies(make_client: ClientFactory) -> None:
    async def from_proxy(request: Request) -> str | None:
        return request.headers.get("x-forwarded-user")

    # No policy: the host's own middleware authenticates and says who the caller is.
    client = await make_client(user_resolver=from_proxy)
    response = await client.post(
        "/api/bulks",
        data={"operationName": "record", "metadata": '{"requestedBy": "t"}', "createdBy": "x"},
        files={"file": ("rows.csv", b"name,email\nAda,a@x.io\n", "text/csv")},
        headers={"X-Forwarded-User": "dana"},
    )
    assert await created_by(client, response) == "dana"
    # Without the header the resolver has no answer and anonymous use keeps the form value.
    assert await created_by(client, await submit(client, None, created_by="erin")) == "erin"
