"""Access-control building blocks: route rules, tokens, claims, JWKS parsing, settings."""

from __future__ import annotations

import hashlib

import pydantic
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from bulkops import Settings
from bulkops.api.auth import Access, bearer_token
from bulkops.api.auth.jwks import parse_jwks
from bulkops.api.auth.jwt_bearer import principal_name, token_scopes
from bulkops.api.auth.middleware import required_access
from bulkops.api.auth.tokens import StaticTokens, default_token_name
from bulkops.settings import TokenGrant


@pytest.mark.parametrize(
    ("method", "path", "needed"),
    [
        ("GET", "/health/live", None),
        ("GET", "/health/ready", None),
        ("GET", "/openapi/v1.json", None),
        ("GET", "/docs", None),
        ("GET", "/dashboard", None),
        ("GET", "/dashboard/bulks/1", None),
        ("GET", "/", None),
        ("GET", "/dashboardx", Access.READ),
        ("GET", "/healthz", Access.READ),
        ("GET", "/api/bulks", Access.READ),
        ("HEAD", "/api/bulks", Access.READ),
        ("GET", "/metrics", Access.READ),
        ("GET", "/api/bulks/1/notifications", Access.READ),
        ("POST", "/api/bulks", Access.OPERATE),
        ("POST", "/api/bulks/validate", Access.OPERATE),
        ("POST", "/health/live", None),
        ("DELETE", "/api/bulks/1", Access.OPERATE),
        ("PATCH", "/anything", Access.OPERATE),
    ],
)
def test_what_each_request_needs(method: str, path: str, needed: Access | None) -> None:
    assert required_access(method, path) is needed


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Basic YTpi", None),
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("BEARER abc", "abc"),
        ("Bearer", ""),
    ],
)
def test_bearer_token_parsing(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_static_tokens_grant_their_role_under_their_name() -> None:
    tokens = StaticTokens(
        {
            "r-token": TokenGrant(role="read"),
            "o-token": TokenGrant(role="operate", name="deployer"),
        }
    )
    reader = tokens.authenticate("r-token")
    assert reader is not None and reader.may(Access.READ) and not reader.may(Access.OPERATE)
    assert reader.name == "token-" + hashlib.sha256(b"r-token").hexdigest()[:8]
    assert reader.name == default_token_name("r-token")
    operator = tokens.authenticate("o-token")
    assert operator is not None and operator.name == "deployer"
    assert operator.may(Access.READ) and operator.may(Access.OPERATE)
    assert tokens.authenticate("o-token ") is None
    assert tokens.authenticate("") is None


def test_scopes_and_names_from_claims() -> None:
    assert token_scopes({"scope": "a b  c"}) == {"a", "b", "c"}
    assert token_scopes({"scp": ["a", 3], "scopes": "b c"}) == {"a", "b", "c"}
    assert token_scopes({}) == frozenset()
    assert principal_name({"sub": "s", "preferred_username": "p", "name": "n"}) == "s"
    assert principal_name({"sub": " ", "preferred_username": "p", "name": "n"}) == "p"
    assert principal_name({"name": "n", "sub": 42}) == "n"
    assert principal_name({}) is None


def test_jwks_keeps_only_public_signing_keys_with_their_pinned_algorithm() -> None:
    rsa_public = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    p256 = ec.generate_private_key(ec.SECP256R1())
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    keys = parse_jwks(
        {
            "keys": [
                {**RSAAlgorithm.to_jwk(rsa_public, as_dict=True), "kid": "rsa"},
                {**ECAlgorithm.to_jwk(p256.public_key(), as_dict=True), "kid": "ec"},
                {**ECAlgorithm.to_jwk(p384, as_dict=True), "kid": "p384"},
                {**ECAlgorithm.to_jwk(p256, as_dict=True), "kid": "private"},
                {**RSAAlgorithm.to_jwk(rsa_public, as_dict=True), "kid": "rs512", "alg": "RS512"},
                {**RSAAlgorithm.to_jwk(rsa_public, as_dict=True), "kid": "enc", "use": "enc"},
                {"kty": "oct", "k": "c2VjcmV0", "kid": "symmetric"},
                {"kty": "RSA", "kid": "broken", "n": "??", "e": "AQAB"},
                "not a key",
            ]
        }
    )
    assert {kid: key.algorithm for kid, key in keys.items()} == {"rsa": "RS256", "ec": "ES256"}
    with pytest.raises(ValueError, match="keys"):
        parse_jwks({"no": "keys"})


@pytest.mark.parametrize(
    "value",
    [
        '{"t1": "read", "t2": "operate", "t3": {"role": "read", "name": "n"}}',
        {"t1": "read", "t2": "operate", "t3": {"role": "read", "name": "n"}},
    ],
)
def test_token_settings_from_json_or_mapping(value: object) -> None:
    settings = Settings(auth_tokens=value)
    assert settings.auth_tokens == {
        "t1": TokenGrant(role="read"),
        "t2": TokenGrant(role="operate"),
        "t3": TokenGrant(role="read", name="n"),
    }


def test_token_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BULKOPS_AUTH_TOKENS", '{"env-token": "operate"}')
    monkeypatch.setenv("BULKOPS_AUTH_JWT_REQUIRED_CLAIMS", "exp, iat")
    settings = Settings()
    assert settings.auth_tokens == {"env-token": TokenGrant(role="operate")}
    assert settings.auth_jwt_required_claims == ["exp", "iat"]
    assert "env-token" not in repr(settings)  # secrets never reach a log line


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("auth_tokens", "{not json", "JSON object"),
        ("auth_tokens", '["t"]', "JSON object"),
        ("auth_tokens", '{"t": "admin"}', "read"),
        ("auth_tokens", '{" t": "read"}', "surrounding spaces"),
        ("auth_tokens", '{"t": {"role": "read", "extra": 1}}', "extra"),
        ("auth_jwt_secret", "too-short", "32 bytes"),
        ("auth_jwt_jwks_url", "http://idp.example/jwks", "https"),
        ("auth_jwt_jwks_url", "ftp://127.0.0.1/jwks", "https"),
        ("read_policy", "module.without.callable", "pattern"),
    ],
)
def test_unusable_auth_settings_are_refused(field: str, value: str, message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        Settings(**{field: value})


def test_jwks_over_plain_http_only_on_loopback() -> None:
    for url in ("https://idp.example/jwks", "http://127.0.0.1:9/jwks", "http://localhost/k"):
        assert Settings(auth_jwt_jwks_url=url).auth_jwt_jwks_url == url
    secret = "s" * 32
    assert secret not in repr(Settings(auth_jwt_secret=secret))
