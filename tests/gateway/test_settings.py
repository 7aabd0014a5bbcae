"""Gateway settings: defaults, variables, backends, and the command's flags."""

from __future__ import annotations

import pydantic
import pytest
from typer.testing import CliRunner

from bulkops import GatewaySettings
from bulkops.cli.main import app
from bulkops.gateway.settings import parse_backends

runner = CliRunner()


def test_defaults_are_the_documented_ones() -> None:
    settings = GatewaySettings()
    assert settings.backends == {}
    assert (settings.http_timeout, settings.http_retry_count) == (30, 2)
    assert (settings.circuit_breaker_failures, settings.circuit_breaker_break_duration) == (5, 15)
    assert settings.registry_refresh_interval == 300
    assert settings.fan_out_timeout_per_backend == 10
    assert settings.forward_bearer_token is True
    assert (settings.list_prefix_bound, settings.id_cache_ttl) == (1000, 3600)
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)


def test_every_setting_has_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "BULKOPS_GATEWAY_BACKENDS": "eu=http://eu.internal:8000, us",
        "BULKOPS_GATEWAY_HTTP_TIMEOUT": "5",
        "BULKOPS_GATEWAY_HTTP_RETRY_COUNT": "0",
        "BULKOPS_GATEWAY_CIRCUIT_BREAKER_FAILURES": "2",
        "BULKOPS_GATEWAY_CIRCUIT_BREAKER_BREAK_DURATION": "3.5",
        "BULKOPS_GATEWAY_REGISTRY_REFRESH_INTERVAL": "60",
        "BULKOPS_GATEWAY_FAN_OUT_TIMEOUT_PER_BACKEND": "1.5",
        "BULKOPS_GATEWAY_FORWARD_BEARER_TOKEN": "false",
        "BULKOPS_GATEWAY_LIST_PREFIX_BOUND": "200",
        "BULKOPS_GATEWAY_ID_CACHE_TTL": "120",
        "BULKOPS_HOST": "0.0.0.0",
        "BULKOPS_PORT": "9000",
        "BULKOPS_CORS_ORIGINS": "https://ops.example",
        "BULKOPS_MAX_HEADER_BYTES": "16384",
        "BULKOPS_HEADER_TIMEOUT": "4",
        "BULKOPS_BODY_TIMEOUT": "6",
        "BULKOPS_BODY_MIN_RATE": "0",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = GatewaySettings()
    assert settings.backends == {"eu": "http://eu.internal:8000", "us": "http://us"}
    assert settings.model_dump(exclude={"backends", "openapi_enabled"}) == {
        "http_timeout": 5,
        "http_retry_count": 0,
        "circuit_breaker_failures": 2,
        "circuit_breaker_break_duration": 3.5,
        "registry_refresh_interval": 60,
        "fan_out_timeout_per_backend": 1.5,
        "forward_bearer_token": False,
        "list_prefix_bound": 200,
        "id_cache_ttl": 120,
        "host": "0.0.0.0",
        "port": 9000,
        "cors_origins": ["https://ops.example"],
        "max_header_bytes": 16384,
        "header_timeout": 4,
        "body_timeout": 6,
        "body_min_rate": 0,
    }
    assert GatewaySettings(port=1234).port == 1234  # fields by name in code


def test_backends_from_flags_mappings_and_names_alone() -> None:
    assert parse_backends(["a=http://10.0.0.1:8000/", "b"]) == {
        "a": "http://10.0.0.1:8000",
        "b": "http://b",
    }
    assert parse_backends({"a": None, "b": "https://b.example"}) == {
        "a": "http://a",
        "b": "https://b.example",
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a=http://x,a=http://y", "given twice"),
        ("=http://x", "needs a name"),
        ("a=ftp://x", r"not an http\(s\) URL"),
    ],
)
def test_bad_backends_are_refused(value: str, message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        GatewaySettings(backends=value)


def test_wildcard_cors_origin_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"'\*' is not allowed"):
        GatewaySettings(cors_origins=["*"])


def test_every_setting_is_a_flag_of_the_command() -> None:
    result = runner.invoke(app, ["gateway", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for name in GatewaySettings.model_fields:
        flag = "--backend" if name == "backends" else "--" + name.replace("_", "-")
        assert flag in result.output, name


def test_bad_flags_name_the_flag_and_the_variable() -> None:
    result = runner.invoke(app, ["gateway", "--http-timeout", "0"])
    assert result.exit_code == 2
    assert "--http-timeout / BULKOPS_GATEWAY_HTTP_TIMEOUT: Input should be greater" in (
        result.output
    )
    twice = runner.invoke(app, ["gateway", "--backend", "a=http://x", "--backend", "a=http://y"])
    assert twice.exit_code == 2 and "--backend / BULKOPS_GATEWAY_BACKENDS" in twice.output
