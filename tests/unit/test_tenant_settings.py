"""Tenant settings: a token's tenant, the JWT claim, the resolver and the active limit, and
the clear refusal of a tenant that is there but unusable."""

from __future__ import annotations

import pydantic
import pytest
from typer.testing import CliRunner

from bulkops import Settings
from bulkops.api.auth.tokens import StaticTokens
from bulkops.cli.main import app
from bulkops.settings import TokenGrant

runner = CliRunner()


def test_a_token_names_its_tenant() -> None:
    settings = Settings(
        auth_tokens='{"t1": {"role": "operate", "name": "alice", "tenant": " acme "}, "t2": "read"}'
    )
    assert settings.auth_tokens["t1"] == TokenGrant(role="operate", name="alice", tenant="acme")
    tokens = StaticTokens(settings.auth_tokens)
    alice, reader = tokens.authenticate("t1"), tokens.authenticate("t2")
    assert alice is not None and alice.tenant == "acme" and alice.name == "alice"
    assert reader is not None and reader.tenant is None


def test_tenant_settings_and_their_defaults() -> None:
    settings = Settings()
    assert settings.auth_jwt_tenant_claim == "tenant"
    assert settings.tenant_resolver is None and settings.tenant_max_active is None
    chosen = Settings(tenant_resolver="pkg.mod:resolve", tenant_max_active=3)
    assert chosen.tenant_resolver == "pkg.mod:resolve" and chosen.tenant_max_active == 3


@pytest.mark.parametrize("tenant", ["42", '""', '"   "', "null", '["acme"]', '{"id": 1}'])
def test_a_malformed_token_tenant_is_refused_at_start(tenant: str) -> None:
    value = f'{{"secret-token": {{"role": "read", "tenant": {tenant}}}}}'
    with pytest.raises(pydantic.ValidationError, match="tenant must be a non-empty string"):
        Settings(auth_tokens=value)
    result = runner.invoke(app, ["serve"], env={"BULKOPS_AUTH_TOKENS": value})
    assert result.exit_code == 2
    assert "BULKOPS_AUTH_TOKENS" in result.output
    assert "tenant must be a non-empty string" in result.output
    assert "secret-token" not in result.output  # the token itself never reaches the output


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tenant_max_active", 0),
        ("tenant_resolver", "no-callable"),
        ("auth_jwt_tenant_claim", ""),
    ],
)
def test_unusable_tenant_settings_are_refused(field: str, value: object) -> None:
    with pytest.raises(pydantic.ValidationError):
        Settings(**{field: value})


def test_the_tenant_settings_are_flags() -> None:
    result = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    for flag in ("--tenant-resolver", "--tenant-max-active", "--auth-jwt-tenant-claim"):
        assert flag in result.output
