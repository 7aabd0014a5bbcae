"""Settings: every option is a ``BULKOPS_*`` environment variable and a CLI flag."""

from __future__ import annotations

import ipaddress
import json
import os
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# RFC 7518 section 3.2: an HS256 key must be at least as long as the hash output.
MIN_JWT_SECRET_BYTES = 32
_POLICY_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
# BULKOPS_MAX_EXPANDED_BYTES unset: this many times the upload limit.
EXPANSION_FACTOR = 20


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class TokenGrant(BaseModel):
    """What one static bearer token may do (``BULKOPS_AUTH_TOKENS`` values).

    Attributes:
        role: ``read`` (GET routes) or ``operate`` (every route; operate implies read).
        name: The principal recorded as ``createdBy``; default ``token-`` plus the first
            8 hex digits of the token's SHA-256.
        tenant: The tenant the token acts for: it sees and changes only that tenant's
            operations. None: every operation (an unscoped credential).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["read", "operate"]
    name: str | None = Field(default=None, min_length=1)
    tenant: str | None = Field(default=None, max_length=200)

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant_text(cls, value: Any) -> Any:
        # A tenant that is there but unusable must stop the start: read as "no tenant" it
        # would let the token see every tenant's operations.
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"tenant must be a non-empty string, not {value!r}")
        return value.strip()


def _token_grants(value: Any) -> Any:
    """``BULKOPS_AUTH_TOKENS`` as JSON text or a mapping; bare roles become grants."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object of token -> role: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ValueError('must be a JSON object such as {"<token>": "read"}')
    grants = {}
    for token, grant in value.items():
        if not isinstance(token, str) or not token.strip() or token != token.strip():
            raise ValueError("tokens must be non-empty strings without surrounding spaces")
        grants[token] = {"role": grant} if isinstance(grant, str) else grant
    return grants


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    database_url: str = Field(
        default="sqlite:///bulkops-data/bulkops.db",
        description="sqlite:///relative/path, sqlite:////absolute/path, postgresql://... or "
        "memory:// (one process, nothing kept).",
    )
    files_url: str = Field(
        default="file://./bulkops-data/files",
        description="Where uploads are kept: file:///dir, file://./relative, memory:// or "
        "s3://bucket/prefix.",
    )
    s3_endpoint: str | None = Field(
        default=None,
        description="S3-compatible endpoint (credentials from the usual AWS_* variables); "
        "unset: AWS.",
    )
    s3_region: str | None = Field(
        default=None, description="Region of the S3 store; unset: the AWS default."
    )
    host: str = Field(default="127.0.0.1", description="Listen address of serve.")
    port: int = Field(default=8000, ge=0, le=65535, description="Listen port of serve.")
    role: Literal["combined", "api"] = Field(
        default="combined",
        description="What serve runs: combined (HTTP and processing) or api (HTTP only).",
    )
    service_name: str = Field(
        default="default", description="Stamped into each operation's source."
    )
    worker_count: int = Field(
        default=4,
        ge=1,
        description="How much one process runs at once: BULKOPS_WORKER_COUNT x "
        "BULKOPS_MAX_ROW_CONCURRENCY row slots, shared fairly by every operation in progress "
        "(not a limit on how many are in progress); also sizes the PostgreSQL connection "
        "pool (this + 4).",
    )
    max_row_concurrency: int = Field(
        default=1,
        ge=1,
        description="Rows (or batches) of one operation, or of one chunk of it, in flight at "
        "once in a process; times BULKOPS_WORKER_COUNT, the process's row slots.",
    )
    max_retry_attempts: int = Field(
        default=10,
        ge=0,
        description="Retries of its failed rows allowed per operation (0: unlimited).",
    )
    pending_poll_interval: float | None = Field(
        default=None, ge=0, description="Seconds; 0 turns the poller off; unset: role default."
    )
    stuck_operation_timeout: float | None = Field(
        default=None,
        gt=0,
        description="An operation Running longer than this is failed; unset: never.",
    )
    enable_orphaned_step_recovery: bool = Field(
        default=False,
        description="At start, fail each Running operation (not split into chunks) whose "
        "worker's heartbeat is older than BULKOPS_ORPHAN_AGE, and its rows waiting for a "
        "signal longer than that, instead of resuming it.",
    )
    orphan_age: float = Field(
        default=300,
        gt=0,
        description="How old a worker's heartbeat (and a row's wait for a signal) must be for "
        "orphaned-step recovery to fail them.",
    )
    signal_poll_interval: float = Field(
        default=2,
        gt=0,
        description="How often a worker looks for signals recorded by other processes for "
        "its waiting rows.",
    )
    step_retry_delay: float = Field(
        default=1.0,
        ge=0,
        description="Base delay of per-step retries (doubles each attempt, jittered, max 30 s).",
    )
    heartbeat_interval: float | None = Field(
        default=None,
        gt=0,
        description="How often a worker renews its heartbeat; unset: 5, or a third of the "
        "shorter of BULKOPS_ABANDON_AFTER and BULKOPS_ORPHAN_AGE when that is less.",
    )
    abandon_after: float = Field(
        default=30,
        gt=0,
        description="A held operation whose heartbeat is older than this is resumed by "
        "another process.",
    )
    storage_retry_timeout: float = Field(
        default=120,
        ge=0,
        description="How long processing retries storage writes during an outage before it "
        "leaves the operation to be resumed.",
    )
    chunk_rows: int = Field(
        default=10000,
        ge=0,
        description="The most rows one chunk holds: every operation is processed as ranges of "
        "rows (chunks) cut by time at the pace of its first rows, which every worker sharing "
        "the database claims, none larger than this (0: never split).",
    )
    row_helpers: int | None = Field(
        default=None,
        ge=0,
        description="Helper processes that read, validate and run the rows of chunks beside "
        "the event loop, so that a second core works on a large import (0: none; unset: one "
        "when the machine has more than one core). Only for operations loaded from "
        "BULKOPS_OPERATIONS (or the examples).",
    )
    worker_processes: int | None = Field(
        default=None,
        ge=0,
        description="Worker processes serve runs beside its HTTP process to process "
        "operations, started, watched, restarted and stopped with it (0: processing inside "
        "the HTTP process; unset: one per core). Only serve's combined role uses it, and "
        "not with storage in memory (memory:// or BULKOPS_EVENT_STORE=memory).",
    )
    max_resumes: int = Field(
        default=5,
        ge=0,
        description="Resumptions after which an operation that keeps stopping its worker is "
        "failed instead (0: never resume, fail at once).",
    )
    sqlite_busy_timeout: float = Field(
        default=30,
        gt=0,
        description="Seconds a SQLite statement waits for another process's lock.",
    )
    shutdown_timeout: float = Field(
        default=30,
        ge=0,
        description="How long a stopping process lets its operations run before it stops "
        "them; unfinished ones go back to Pending (their finished rows are kept).",
    )
    max_upload_bytes: int = Field(
        default=100 * 1024 * 1024, ge=0, description="Upload limit in bytes (0: unlimited)."
    )
    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="Largest request line and header fields a client may send, in bytes "
        "(431 beyond).",
    )
    header_timeout: float = Field(
        default=10,
        gt=0,
        description="Seconds a client has to send a request's headers (408 after).",
    )
    body_timeout: float = Field(
        default=20,
        gt=0,
        description="Longest pause in a request body, in seconds (408 after).",
    )
    body_min_rate: float = Field(
        default=1024,
        ge=0,
        description="Slowest average rate of a request body after its first BODY_TIMEOUT "
        "seconds, in bytes per second (0: no minimum).",
    )
    idempotency_ttl: float = Field(
        default=86400,
        gt=0,
        description="How long an Idempotency-Key of a create is remembered, in seconds.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Allowed browser origins: comma-separated in the variable, one per flag "
        "(repeat it); '*' is refused.",
    )
    webhook_secret: str | None = Field(
        default=None,
        description="Signs webhook notifications: Bulkops-Signature: sha256=<HMAC of the body>.",
    )
    webhook_allow_private: bool = Field(
        default=True,
        description="Allow webhook targets on private or loopback addresses (turn off in "
        "production).",
    )
    source_url_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="URL prefixes a create or validate may read its file from (sourceUrl), "
        "comma-separated, each http:// or https:// with a host; empty: every http(s) URL "
        "refused. A prefix naming a host by name is read only while the name resolves to "
        "public addresses.",
    )
    source_url_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a sourceUrl may take to connect, and at most between two reads "
        "of its body, before it counts as failing (502).",
    )
    event_store: Literal["sql", "memory"] = Field(
        default="sql",
        description="Where operation events are kept: sql (the operations database, shared) "
        "or memory (per process).",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Log lines as text or as one JSON object each (with operationId).",
    )
    openapi_enabled: bool = Field(default=True, description="Serve /openapi/v1.json and /docs.")
    migrate_on_start: bool = Field(
        default=True,
        description="Apply database migrations when serve and worker start.",
    )
    flush_rows: int = Field(
        default=1000,
        ge=1,
        description="Largest write batch: a write carries up to twice this many row records "
        "(finished rows are written as soon as the write before is done).",
    )
    flush_interval: float = Field(
        default=0.5,
        gt=0,
        description="How often a run checks its operation's stored status (a cancellation "
        "from another process) and a row helper reports its rows. Writes never wait for it.",
    )

    # Access control (README, Security). No setting at all: no checks. Secrets stay out of
    # the settings' repr so they never reach a log line.
    auth_tokens: Annotated[dict[str, TokenGrant], NoDecode] = Field(
        default_factory=dict,
        repr=False,
        description='Static bearer tokens: JSON {"<token>": "read"|"operate"|{"role", "name", '
        '"tenant"}}.',
    )
    auth_jwt_secret: SecretStr | None = Field(
        default=None, description="HS256 shared secret for JWT bearer tokens (32+ bytes)."
    )
    auth_jwt_jwks_url: str | None = Field(
        default=None, description="JWKS address of the token issuer's RS256/ES256 keys."
    )
    auth_jwt_audience: str | None = Field(default=None, description="Required JWT aud.")
    auth_jwt_issuer: str | None = Field(default=None, description="Required JWT iss.")
    auth_jwt_read_scope: str = Field(
        default="bulkops.read", description="JWT scope granting reads; empty: any valid token."
    )
    auth_jwt_operate_scope: str = Field(
        default="bulkops.operate", description="JWT scope granting reads and operations."
    )
    auth_jwt_leeway: float = Field(
        default=0, ge=0, le=300, description="Seconds of clock skew allowed on exp/nbf/iat."
    )
    auth_jwt_required_claims: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Claims every JWT must carry, comma-separated (e.g. exp).",
    )
    auth_jwt_jwks_ttl: float = Field(
        default=3600, gt=0, description="Seconds JWKS keys are used before they are fetched again."
    )
    auth_jwt_jwks_min_refresh_interval: float = Field(
        default=10,
        ge=0,
        description="Least seconds between two JWKS fetches (an unknown kid triggers one).",
    )
    read_policy: str | None = Field(
        default=None,
        pattern=_POLICY_PATTERN,
        description="Custom read policy, module:callable(principal, request) -> bool.",
    )
    operate_policy: str | None = Field(
        default=None,
        pattern=_POLICY_PATTERN,
        description="Custom operate policy, module:callable(principal, request) -> bool.",
    )
    # Tenants (docs/guides/tenants.md): a principal with a tenant sees only its operations.
    auth_jwt_tenant_claim: str = Field(
        default="tenant",
        min_length=1,
        description="The JWT claim naming the caller's tenant.",
    )
    tenant_resolver: str | None = Field(
        default=None,
        pattern=_POLICY_PATTERN,
        description="Names the tenant of a caller whose credential carries none, "
        "module:callable(principal, request) -> str | None.",
    )
    tenant_max_active: int | None = Field(
        default=None,
        ge=1,
        description="Most Pending, Running or Retrying operations of one tenant (its "
        "tenant, else its creator); a create beyond it is answered 429; unset: no limit.",
    )
    # Hostile input (docs/explanation/guarantees.md, "Hostile input").
    export_escape_formulas: bool = Field(
        default=True,
        description="CSV exports and templates put a ' before a cell beginning with =, +, -, "
        "@, a tab or a carriage return (not before a plain number), so a spreadsheet does not "
        "run it as a formula; bulkops fix removes it again.",
    )
    max_expanded_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Bytes a compressed upload may expand to (a gzip file; an XLSX file's "
        "worksheet and shared strings), counted as decompressed; beyond, validate answers 413 "
        "and an operation fails before any row runs. Unset: 20 x MAX_UPLOAD_BYTES; 0: "
        "unlimited.",
    )
    tenant_max_rows_per_day: int | None = Field(
        default=None,
        ge=1,
        description="Rows one tenant (its tenant, else its creator) may submit in any 24 hours; "
        "a create whose file would pass it is answered 429 with Retry-After; unset: no limit.",
    )
    max_file_rows: int = Field(
        default=0,
        ge=0,
        description="Data rows one file may hold, refused as MAX_EXPANDED_BYTES is (0: unlimited).",
    )
    storage_timeout: float = Field(
        default=10,
        ge=0,
        description="Seconds a call to PostgreSQL or to an S3 file store may take before it "
        "fails as unavailable (a request answers 503, processing waits and retries): "
        "connect and statement time limits, TCP keepalives, for a partition that drops "
        "packets without a reset (0: no limit).",
    )
    action_rate: float = Field(
        default=20.0,
        gt=0,
        description="Operations a bulk action (POST /api/actions) acts on per second, in "
        "each process running one.",
    )

    @field_validator("operations", "cors_origins", "auth_jwt_required_claims", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return _split_commas(value)

    @field_validator("source_url_allow", mode="before")
    @classmethod
    def _source_prefixes(cls, value: Any) -> Any:
        return _split_commas(value)

    @field_validator("source_url_allow")
    @classmethod
    def _http_prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            parts = urlsplit(prefix)
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{prefix!r} is not an http:// or https:// URL with a host")
        return value

    @field_validator("auth_tokens", mode="before")
    @classmethod
    def _tokens(cls, value: Any) -> Any:
        return _token_grants(value)

    @field_validator("auth_jwt_secret")
    @classmethod
    def _long_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().encode()) < MIN_JWT_SECRET_BYTES:
            raise ValueError(
                f"must be at least {MIN_JWT_SECRET_BYTES} bytes (RFC 7518: an HS256 key is at "
                "least as long as its hash)"
            )
        return value

    @field_validator("auth_jwt_jwks_url")
    @classmethod
    def _jwks_over_tls(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        # Keys fetched in clear text could be swapped on the way; loopback is for tests and
        # sidecars.
        loopback = _is_loopback(parts.hostname or "")
        if parts.scheme == "https" or (parts.scheme == "http" and loopback):
            return value
        raise ValueError("must be an https:// address (http:// only on loopback)")

    @model_validator(mode="after")
    def _heartbeats_fit(self) -> Settings:
        # A default never contradicts a legal setting: only values the user set both can.
        beat = self.heartbeat_interval
        if beat is None:
            return self
        if beat >= self.abandon_after:
            raise ValueError(
                "BULKOPS_HEARTBEAT_INTERVAL must be shorter than BULKOPS_ABANDON_AFTER, or live "
                "workers would look abandoned"
            )
        if self.enable_orphaned_step_recovery and beat >= self.orphan_age:
            raise ValueError(
                "BULKOPS_HEARTBEAT_INTERVAL must be shorter than BULKOPS_ORPHAN_AGE, or live "
                "workers would look orphaned"
            )
        return self

    @property
    def effective_row_helpers(self) -> int:
        """``row_helpers``, or its default for this machine."""
        if self.row_helpers is not None:
            return self.row_helpers
        return 1 if (os.cpu_count() or 1) > 1 else 0

    @property
    def effective_worker_processes(self) -> int:
        """``worker_processes``, or its default: the cores this process may run on. None
        where storage is kept in the process's memory (a ``memory://`` database or file
        store, the memory event store): other processes could not see it."""
        per_process = (
            self.database_url.startswith("memory://")
            or self.files_url.startswith("memory://")
            or self.event_store == "memory"
        )
        if per_process:
            return 0
        if self.worker_processes is not None:
            return self.worker_processes
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1

    @property
    def effective_heartbeat_interval(self) -> float:
        """The heartbeat interval: the one set, else 5 s or a third of the shorter of the
        abandon and orphan ages when that is less."""
        if self.heartbeat_interval is not None:
            return self.heartbeat_interval
        return min(5.0, self.abandon_after / 3, self.orphan_age / 3)

    @model_validator(mode="after")
    def _no_wildcard_origin(self) -> Settings:
        if any(origin.strip() == "*" for origin in self.cors_origins):
            raise ValueError(
                "BULKOPS_CORS_ORIGINS must list origins explicitly: '*' is not allowed because "
                "credentials are allowed"
            )
        return self

    @property
    def effective_max_expanded_bytes(self) -> int:
        """``max_expanded_bytes``, or 20 x ``max_upload_bytes`` when unset (0: unlimited)."""
        if self.max_expanded_bytes is not None:
            return self.max_expanded_bytes
        return EXPANSION_FACTOR * self.max_upload_bytes

    def poll_interval_for(self, role: str) -> float | None:
        """The effective Pending poll interval: explicit setting, else the role's default."""
        interval = self.pending_poll_interval
        if interval is None:
            interval = 2.0 if role == "worker" else 0.0
        return interval or None
