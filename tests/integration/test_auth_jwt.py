"""JWT bearer tokens: HS256 with a secret, RS256/ES256 from a real JWKS endpoint."""

from __future__ import annotations

import base64
import hmac
import json
import time
from collections.abc import Iterator

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from tests.integration.auth_support import (
    SECRET,
    JwksServer,
    bearer,
    claims,
    ec_key,
    hs256,
    jwks_server,
    public_jwk,
    rsa_key,
    signed,
)
from tests.integration.conftest import ClientFactory
from tests.integration.test_auth_tokens import created_by, submit


@pytest.fixture
def jwks() -> Iterator[JwksServer]:
    """A JWKS endpoint on loopback."""
    with jwks_server() as server:
        yield server


async def status_of(client: httpx.AsyncClient, token: str) -> int:
    return (await client.get("/api/bulks", headers=bearer(token))).status_code


async def test_hs256_scopes_grant_read_and_operate(make_client: ClientFactory) -> None:
    client = await make_client(auth_jwt_secret=SECRET)
    reader = hs256(scope="bulkops.read")
    assert await status_of(client, reader) == 200
    assert (await submit(client, reader)).status_code == 403
    nobody = hs256(scope="profile email")
    assert await status_of(client, nobody) == 403
    operator = hs256(scope="openid bulkops.operate")  # operate implies read
    assert await status_of(client, operator) == 200
    response = await submit(client, operator, created_by="mallory")
    assert await created_by(client, response, operator) == "alice"


@pytest.mark.parametrize(
    "claim",
    [{"scp": ["bulkops.operate"]}, {"scopes": ["bulkops.operate"]}, {"scp": "x bulkops.operate"}],
)
async def test_scope_lists_are_read_too(
    make_client: ClientFactory, claim: dict[str, object]
) -> None:
    client = await make_client(auth_jwt_secret=SECRET)
    token = hs256(scope=None, **claim)
    assert (await submit(client, token)).status_code == 201


async def test_principal_falls_back_to_preferred_username_then_name(
    make_client: ClientFactory,
) -> None:
    client = await make_client(auth_jwt_secret=SECRET)
    by_username = hs256(sub=None, preferred_username="bob", name="Bob B.")
    assert await created_by(client, await submit(client, by_username), by_username) == "bob"
    by_name = hs256(sub=None, name="Carol C.")
    assert await created_by(client, await submit(client, by_name), by_name) == "Carol C."
    nameless = hs256(sub=None)
    assert await status_of(client, nameless) == 401


async def test_custom_scope_names(make_client: ClientFactory) -> None:
    client = await make_client(
        auth_jwt_secret=SECRET, auth_jwt_read_scope="bulk:r", auth_jwt_operate_scope="bulk:w"
    )
    assert await status_of(client, hs256(scope="bulk:r")) == 200
    assert (await submit(client, hs256(scope="bulk:r"))).status_code == 403
    assert (await submit(client, hs256(scope="bulk:w"))).status_code == 201
    assert await status_of(client, hs256(scope="bulkops.operate")) == 403


async def test_time_audience_and_issuer_are_enforced(make_client: ClientFactory) -> None:
    client = await make_client(
        auth_jwt_secret=SECRET, auth_jwt_audience="bulkops", auth_jwt_issuer="https://idp.test"
    )
    good = {"aud": "bulkops", "iss": "https://idp.test"}
    assert await status_of(client, hs256(**good)) == 200
    now = int(time.time())
    refused = {
        "expired": hs256(**good, iat=now - 7200, exp=now - 3600),
        "not yet valid": hs256(**good, nbf=now + 3600),
        "wrong audience": hs256(aud="someone-else", iss="https://idp.test"),
        "no audience": hs256(iss="https://idp.test"),
        "wrong issuer": hs256(aud="bulkops", iss="https://evil.test"),
        "other secret": jwt.encode(claims(**good), "x" * 40, algorithm="HS256"),
        "garbage": "not.a.jwt",
    }
    for what, token in refused.items():
        response = await client.get("/api/bulks", headers=bearer(token))
        assert response.status_code == 401, what
        assert 'error="invalid_token"' in response.headers["WWW-Authenticate"], what


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, object], payload: dict[str, object], key: bytes | None) -> str:
    """A token built without PyJWT, which refuses to make these: ``alg: none`` when
    ``key`` is None, else an HMAC-SHA256 signature with ``key`` as the secret."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    if key is None:
        return signing_input + "."
    return signing_input + "." + _b64(hmac.new(key, signing_input.encode(), "sha256").digest())


def unsigned(payload: dict[str, object]) -> str:
    """An ``alg: none`` token."""
    return hand_made({"alg": "none", "typ": "JWT"}, payload, None)


async def test_rs256_and_es256_from_a_real_jwks_endpoint(
    make_client: ClientFactory, jwks: JwksServer
) -> None:
    rsa, ec = rsa_key(), ec_key()
    jwks.keys = [public_jwk(rsa, "rsa-1"), public_jwk(ec, "ec-1")]
    client = await make_client(auth_jwt_jwks_url=jwks.url, auth_jwt_audience="bulkops")
    rs_token = signed(rsa, "rsa-1", aud="bulkops")
    es_token = signed(ec, "ec-1", aud="bulkops", sub="erin")
    assert await status_of(client, rs_token) == 200
    assert await created_by(client, await submit(client, es_token), es_token) == "erin"
    assert jwks.fetches == 1  # keys are cached
    # A key the issuer does not publish, under a published kid.
    assert await status_of(client, signed(rsa_key(), "rsa-1", aud="bulkops")) == 401
    # The ES256 key may not sign with another algorithm than its pinned one.
    swapped = jwt.encode(claims(aud="bulkops"), rsa, algorithm="RS256", headers={"kid": "ec-1"})
    assert await status_of(client, swapped) == 401


async def test_none_and_hs256_with_the_public_key_are_refused(
    make_client: ClientFactory, jwks: JwksServer
) -> None:
    rsa = rsa_key()
    jwks.keys = [public_jwk(rsa, "rsa-1")]
    pem = rsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # Key confusion: HS256 "signed" with the published public key as the HMAC secret.
    confused = hand_made({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, claims(), pem)
    for settings in (
        {"auth_jwt_jwks_url": jwks.url},
        {"auth_jwt_jwks_url": jwks.url, "auth_jwt_secret": SECRET},
    ):
        client = await make_client(**settings)
        assert await status_of(client, signed(rsa, "rsa-1")) == 200
        assert await status_of(client, confused) == 401
        assert await status_of(client, unsigned(claims())) == 401
    secret_only = await make_client(auth_jwt_secret=SECRET)
    assert await status_of(secret_only, unsigned(claims())) == 401
    assert await status_of(secret_only, signed(rsa, "rsa-1")) == 401


async def test_key_rotation_refreshes_on_an_unknown_kid(
    make_client: ClientFactory, jwks: JwksServer
) -> None:
    old, new = rsa_key(), ec_key()
    jwks.keys = [public_jwk(old, "2024")]
    client = await make_client(auth_jwt_jwks_url=jwks.url, auth_jwt_jwks_min_refresh_interval=0)
    assert await status_of(client, signed(old, "2024")) == 200
    assert jwks.fetches == 1
    jwks.keys = [public_jwk(new, "2025")]  # the issuer rotates
    assert await status_of(client, signed(new, "2025")) == 200
    assert jwks.fetches == 2
    assert await status_of(client, signed(new, "2025")) == 200
    assert jwks.fetches == 2


async def test_refreshes_are_rate_limited(make_client: ClientFactory, jwks: JwksServer) -> None:
    key = rsa_key()
    jwks.keys = [public_jwk(key, "k1")]
    client = await make_client(auth_jwt_jwks_url=jwks.url, auth_jwt_jwks_min_refresh_interval=3600)
    assert await status_of(client, signed(key, "k1")) == 200
    for attempt in range(20):
        assert await status_of(client, signed(key, f"made-up-{attempt}")) == 401
    assert jwks.fetches == 1  # made-up kids cannot make the service hammer the issuer
    assert await status_of(client, signed(key, "k1")) == 200


async def test_unreachable_jwks_without_cached_keys_is_503(
    make_client: ClientFactory, jwks: JwksServer
) -> None:
    jwks.status = 500
    client = await make_client(auth_jwt_jwks_url=jwks.url)
    response = await client.get("/api/bulks", headers=bearer(signed(rsa_key(), "k1")))
    assert response.status_code == 503 and "error" in response.json()
    # Still 401 for a request without a token: no keys are needed to refuse it.
    assert (await client.get("/api/bulks")).status_code == 401


async def test_cached_keys_survive_an_outage(make_client: ClientFactory, jwks: JwksServer) -> None:
    key = rsa_key()
    jwks.keys = [public_jwk(key, "k1")]
    # Keys are due for a refetch on every request (a nanosecond TTL).
    client = await make_client(
        auth_jwt_jwks_url=jwks.url, auth_jwt_jwks_ttl=1e-9, auth_jwt_jwks_min_refresh_interval=0
    )
    assert await status_of(client, signed(key, "k1")) == 200
    jwks.stop()
    assert await status_of(client, signed(key, "k1")) == 200
    assert jwks.fetches == 1  # the server is gone, yet the cached keys still verify
