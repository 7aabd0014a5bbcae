"""Gateway settings: ``BULKOPS_GATEWAY_*`` variables, plus the listen address and CORS of
every bulkops process (``BULKOPS_HOST``, ``BULKOPS_PORT``, ``BULKOPS_CORS_ORIGINS``,
``BULKOPS_OPENAPI_ENABLED``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def parse_backends(value: Any) -> dict[str, str]:
    """Backends as ``{name: url}``.

    Accepts ``"NAME=URL,NAME=URL"`` (the environment form), a list of ``NAME=URL`` items (the
    repeatable ``--backend`` flag) or a mapping. A name without a URL is reached at
    ``http://NAME``, i.e. through DNS service discovery.

    Raises:
        ValueError: an empty or repeated name, or a URL that is not http(s).
    """
    items: list[tuple[str, str | None]]
    if isinstance(value, Mapping):
        items = [(str(k), None if v is None else str(v)) for k, v in value.items()]
    else:
        parts = value.split(",") if isinstance(value, str) else list(value)
        items = []
        for part in (str(p).strip() for p in parts):
            if part:
                name, _, url = part.partition("=")
                items.append((name, url))
    backends: dict[str, str] = {}
    for raw_name, raw_url in items:
        name = raw_name.strip()
        if not name:
            raise ValueError(f"a backend needs a name (NAME=URL), got {raw_name}={raw_url}")
        if name in backends:
            raise ValueError(f"backend {name!r} is given twice")
        url = (raw_url or "").strip() or f"http://{name}"
        split = urlsplit(url)
        if split.scheme not in ("http", "https") or not split.netloc:
            raise ValueError(f"backend {name!r}: {url!r} is not an http(s) URL")
        backends[name] = url.rstrip("/")
    return backends


class GatewaySettings(BaseSettings):
    """Configuration of a gateway process; durations in seconds.

    Read from the environment when constructed without arguments: every gateway setting is
    ``BULKOPS_GATEWAY_<NAME>``; the listen address, CORS origins and the OpenAPI switch use the
    same variables as an instance. Library code receives this object and never reads the
    environment itself.
    """

    model_config = SettingsConfigDict(
        env_prefix="BULKOPS_GATEWAY_", extra="ignore", populate_by_name=True
    )

    backends: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Backends as NAME=URL, comma-separated; a NAME alone means http://NAME.",
    )
    http_timeout: float = Field(
        default=30, gt=0, description="Timeout of one backend request (connect, read, write)."
    )
    http_retry_count: int = Field(
        default=2, ge=0, description="Retries of a failed idempotent (GET/HEAD) backend request."
    )
    circuit_breaker_failures: int = Field(
        default=5, ge=1, description="Consecutive failures that open a backend's circuit."
    )
    circuit_breaker_break_duration: float = Field(
        default=15, gt=0, description="How long an open circuit refuses requests."
    )
    registry_refresh_interval: float = Field(
        default=300, gt=0, description="How often every backend's operations are discovered."
    )
    fan_out_timeout_per_backend: float = Field(
        default=10, gt=0, description="How long a fan-out waits for each backend."
    )
    forward_bearer_token: bool = Field(
        default=True, description="Forward the caller's Authorization: Bearer header."
    )
    list_prefix_bound: int = Field(
        default=1000, ge=1, description="Rows read from each backend to serve a merged list page."
    )
    id_cache_ttl: float = Field(
        default=3600, gt=0, description="Sliding expiry of the operation-to-backend cache."
    )
    # Shared with instances: the same variables, so one environment configures both.
    host: str = Field(
        default="127.0.0.1",
        validation_alias=AliasChoices("BULKOPS_HOST"),
        description="Listen address of the gateway.",
    )
    port: int = Field(
        default=8000,
        ge=0,
        le=65535,
        validation_alias=AliasChoices("BULKOPS_PORT"),
        description="Listen port of the gateway.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("BULKOPS_CORS_ORIGINS"),
        description="Allowed browser origins: comma-separated in the variable, one per flag "
        "(repeat it); '*' is refused.",
    )
    openapi_enabled: bool = Field(
        default=True,
        validation_alias=AliasChoices("BULKOPS_OPENAPI_ENABLED"),
        description="Serve /openapi/v1.json (the backends' descriptions, merged) and /docs.",
    )
    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        validation_alias=AliasChoices("BULKOPS_MAX_HEADER_BYTES"),
        description="Largest request line and header fields a client may send (431 beyond).",
    )
    header_timeout: float = Field(
        default=10,
        gt=0,
        validation_alias=AliasChoices("BULKOPS_HEADER_TIMEOUT"),
        description="Seconds a client has to send a request's headers (408 after).",
    )
    body_timeout: float = Field(
        default=20,
        gt=0,
        validation_alias=AliasChoices("BULKOPS_BODY_TIMEOUT"),
        description="Longest pause in a request body, in seconds (408 after).",
    )
    body_min_rate: float = Field(
        default=1024,
        ge=0,
        validation_alias=AliasChoices("BULKOPS_BODY_MIN_RATE"),
        description="Slowest average body rate after its first BODY_TIMEOUT seconds, in "
        "bytes per second (0: no minimum).",
    )

    @field_validator("backends", mode="before")
    @classmethod
    def _backends(cls, value: Any) -> dict[str, str]:
        return parse_backends(value)

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _no_wildcard_origin(self) -> GatewaySettings:
        if any(origin.strip() == "*" for origin in self.cors_origins):
            raise ValueError(
                "BULKOPS_CORS_ORIGINS must list origins explicitly: '*' is not allowed because "
                "credentials are allowed"
            )
        return self

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable of a field (for messages and docs)."""
        alias = cls.model_fields[field].validation_alias
        if isinstance(alias, AliasChoices):
            return str(alias.choices[0])
        return f"BULKOPS_GATEWAY_{field.upper()}"
