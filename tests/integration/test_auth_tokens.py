"""Static bearer tokens: read vs operate, 401 and 403, attribution, open paths."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import httpx
import pytest

from tests.integration.auth_support import OPERATE_TOKEN, READ_TOKEN, bearer
from tests.integration.conftest import ClientFactory

TOKENS = json.dumps(
    {
        READ_TOKEN: "read",
        OPERATE_TOKEN: "operate",
        "bot-token-0123456789": {"role": "operate", "name": "ci-bot"},
    }
)
CSV = "name,email\nAda,a@x.io\n"


async def submit(
    client: httpx.AsyncClient, token: str | None, created_by: str | None = None
) -> httpx.Response:
    """POST /api/bulks with a small valid file, as ``token`` (None: no credential)."""
    data = {"operationName": "record", "metadata": json.dumps({"requestedBy": "tests"})}
    if created_by is not None:
        data["createdBy"] = created_by
    return await client.post(
        "/api/bulks",
        data=data,
        files={"file": ("rows.csv", CSV.encode(), "text/csv")},
        headers=bearer(token) if token else None,
    )


async def created_by(
    client: httpx.AsyncClient, response: httpx.Response, token: str = OPERATE_TOKEN
) -> Any:
    """The ``createdBy`` of the operation a create answered with (read as ``token``)."""
    assert response.status_code == 201, response.text
    detail = await client.get(f"/api/bulks/{response.json()['operationId']}", headers=bearer(token))
    return detail.json()["createdBy"]


async def test_without_settings_nothing_is_checked(make_client: ClientFactory) -> None:
    client = await make_client()
    assert (await client.get("/api/bulks")).status_code == 200
    response = await submit(client, None, created_by="grace")
    assert response.status_code == 201
    detail = await client.get(f"/api/bulks/{response.json()['operationId']}")
    assert detail.json()["createdBy"] == "grace"  # anonymous use: the form value counts


async def test_no_or_unknown_token_is_401_with_a_bearer_challenge(
    make_client: ClientFactory,
) -> None:
    client = await make_client(auth_tokens=TOKENS)
    missing = await client.get("/api/bulks")
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert "error" in missing.json()
    wrong = await client.get("/api/bulks", headers=bearer("not-a-configured-token"))
    assert wrong.status_code == 401
    assert wrong.headers["WWW-Authenticate"].startswith("Bearer")
    assert 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
    other_scheme = await client.get("/api/bulks", headers={"Authorization": "Basic YTpi"})
    assert other_scheme.status_code == 401
    empty = await client.get("/api/bulks", headers={"Authorization": "Bearer "})
    assert empty.status_code == 401
    # Refused before the body is read: an anonymous upload never reaches storage.
    assert (await submit(client, None)).status_code == 401


async def test_read_token_reads_but_may_not_operate(make_client: ClientFactory) -> None:
    client = await make_client(auth_tokens=TOKENS)
    assert (await client.get("/api/bulks", headers=bearer(READ_TOKEN))).status_code == 200
    assert (await client.get("/api/operations", headers=bearer(READ_TOKEN))).status_code == 200
    refused = await submit(client, READ_TOKEN)
    assert refused.status_code == 403
    assert refused.json()["error"].startswith("Forbidden")
    lower_case_scheme = {"Authorization": f"bearer {READ_TOKEN}"}
    assert (await client.get("/api/bulks", headers=lower_case_scheme)).status_code == 200


async def test_operate_token_creates_and_is_the_creator(make_client: ClientFactory) -> None:
    client = await make_client(auth_tokens=TOKENS)
    response = await submit(client, OPERATE_TOKEN, created_by="mallory")
    expected = "token-" + hashlib.sha256(OPERATE_TOKEN.encode()).hexdigest()[:8]
    assert await created_by(client, response) == expected  # the form value is ignored
    named = await submit(client, "bot-token-0123456789", created_by="mallory")
    assert await created_by(client, named) == "ci-bot"


async def test_open_paths_never_ask(make_client: ClientFactory) -> None:
    client = await make_client(auth_tokens=TOKENS)
    assert (await client.get("/health/live")).status_code == 200
    assert (await client.get("/health/ready")).status_code == 200
    assert (await client.get("/openapi/v1.json")).status_code == 200
    assert (await client.get("/docs")).status_code == 200


async def test_openapi_documents_the_scheme_only_when_configured(
    make_client: ClientFactory,
) -> None:
    secured = (await (await make_client(auth_tokens=TOKENS)).get("/openapi/v1.json")).json()
    assert secured["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for path, item in secured["paths"].items():
        for operation in item.values():
            if path.startswith("/api/") or path == "/metrics":  # guarded paths
                assert operation["security"] == [{"bearerAuth": []}], path
                assert {"401", "403"} <= set(operation["responses"]), path
            else:
                assert "security" not in operation and "401" not in operation["responses"]
    open_ = (await (await make_client()).get("/openapi/v1.json")).json()
    assert "securitySchemes" not in open_["components"]
    assert not any(
        "401" in op["responses"] for item in open_["paths"].values() for op in item.values()
    )


async def test_cors_preflight_and_401_carry_cors_headers(make_client: ClientFactory) -> None:
    client = await make_client(auth_tokens=TOKENS, cors_origins=["https://app.example"])
    preflight = await client.options(
        "/api/bulks",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    assert preflight.status_code == 200
    refused = await client.get("/api/bulks", headers={"Origin": "https://app.example"})
    assert refused.status_code == 401
    # The dashboard on another origin can read the 401 and ask for a token.
    assert refused.headers["access-control-allow-origin"] == "https://app.example"


async def test_tokens_are_never_logged(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = await make_client(auth_tokens=TOKENS)
    await client.get("/api/bulks", headers=bearer(READ_TOKEN))
    await client.get("/api/bulks", headers=bearer("guess-" + OPERATE_TOKEN))
    await submit(client, OPERATE_TOKEN)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert READ_TOKEN not in logged and OPERATE_TOKEN not in logged
    assert READ_TOKEN not in repr(client.runtime.settings)  # type: ignore[attr-defined]
