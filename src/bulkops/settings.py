"""Settings: every option is a ``BULKOPS_*`` environment variable and a CLI flag."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Configuration of a bulkops process.

    Read from ``BULKOPS_*`` environment variables when constructed without arguments;
    durations are in seconds. Library code receives a ``Settings`` object and never reads
    the environment itself.
    """

    model_config = SettingsConfigDict(env_prefix="BULKOPS_", extra="ignore")

    operations: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Modules or .py paths to load, comma-separated (default: the examples).",
    )
    database_url: str = "sqlite:///bulkops-data/bulkops.db"
    files_url: str = "file://./bulkops-data/files"
    s3_endpoint: str | None = None
    s3_region: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    role: Literal["combined", "api"] = "combined"
    service_name: str = "default"
    worker_count: int = Field(default=4, ge=1)
    max_row_concurrency: int = Field(default=1, ge=1)
    max_retry_attempts: int = Field(default=10, ge=0)
    pending_poll_interval: float | None = Field(
        default=None, ge=0, description="Seconds; 0 turns the poller off; unset: role default."
    )
    stuck_operation_timeout: float | None = Field(default=None, gt=0)
    enable_orphaned_step_recovery: bool = False
    orphan_age: float = Field(default=300, gt=0)
    signal_poll_interval: float = Field(default=2, gt=0)
    step_retry_delay: float = Field(
        default=1.0,
        ge=0,
        description="Base delay of per-step retries (doubles each attempt, jittered, max 30 s).",
    )
    heartbeat_interval: float = Field(default=5, gt=0)
    shutdown_timeout: float = Field(default=30, ge=0)
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=0)
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    event_store: Literal["sql", "memory"] = "sql"
    openapi_enabled: bool = True
    migrate_on_start: bool = True
    flush_rows: int = Field(default=1000, ge=1, description="Row records per write batch.")
    flush_interval: float = Field(
        default=0.5, gt=0, description="Longest wait before buffered row records are written."
    )

    @field_validator("operations", "cors_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return _split_commas(value)

    @model_validator(mode="after")
    def _orphans_outlive_heartbeats(self) -> Settings:
        if self.enable_orphaned_step_recovery and self.orphan_age <= self.heartbeat_interval:
            raise ValueError(
                "BULKOPS_ORPHAN_AGE must be longer than BULKOPS_HEARTBEAT_INTERVAL, or live "
                "workers would look orphaned"
            )
        return self

    @model_validator(mode="after")
    def _no_wildcard_origin(self) -> Settings:
        if any(origin.strip() == "*" for origin in self.cors_origins):
            raise ValueError(
                "BULKOPS_CORS_ORIGINS must list origins explicitly: '*' is not allowed because "
                "credentials are allowed"
            )
        return self

    def poll_interval_for(self, role: str) -> float | None:
        """The effective Pending poll interval: explicit setting, else the role's default."""
        interval = self.pending_poll_interval
        if interval is None:
            interval = 2.0 if role == "worker" else 0.0
        return interval or None
