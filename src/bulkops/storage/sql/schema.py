"""The relational schema: SQLAlchemy Core tables shared by SQLite and PostgreSQL.

Migrations (``migrations/versions``) create exactly this schema; a test compares the two.
Column names equal the field names of the records they store.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ColumnElement,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
    literal_column,
    text,
)

from bulkops.storage.sql.types import EnumText, JsonType, UtcDateTime, UuidType
from bulkops.storage.states import (
    ChunkState,
    DeliveryState,
    ErrorType,
    EventType,
    OperationStatus,
    RowState,
    Severity,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

operations = Table(
    "operations",
    metadata,
    Column("id", UuidType(), primary_key=True),
    Column("operation_name", String(200), nullable=False),
    Column("status", EnumText(OperationStatus), nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("source", String(200), nullable=False),
    Column("file_id", String(200), nullable=False),
    Column("file_name", Text(), nullable=False),
    Column("file_size", BigInteger(), nullable=False),
    Column("file_format", String(16), nullable=False),
    Column("metadata", JsonType, nullable=False),
    Column("notifications", JsonType, nullable=True),
    Column("column_map", JsonType, nullable=True),
    Column("schema_version", String(100), nullable=True),
    Column("started_at", UtcDateTime(), nullable=True),
    Column("completed_at", UtcDateTime(), nullable=True),
    Column("total_rows", BigInteger(), nullable=False, server_default="0"),
    Column("processed_rows", BigInteger(), nullable=False, server_default="0"),
    Column("successful_rows", BigInteger(), nullable=False, server_default="0"),
    Column("error_count", BigInteger(), nullable=False, server_default="0"),
    Column("retry_count", Integer(), nullable=False, server_default="0"),
    Column("error_message", Text(), nullable=True),
    Column("version", Integer(), nullable=False, server_default="0"),
    Column("worker_id", String(200), nullable=True),
    Column("heartbeat_at", UtcDateTime(), nullable=True),
    Column("resume_count", Integer(), nullable=False, server_default="0"),
    Column("tenant", String(200), nullable=True),
    Column("dry_run", Boolean(), nullable=False, server_default=false()),
    Column("source_operation_id", UuidType(), nullable=True),
    Column("sheet", Text(), nullable=True),
    Column("priority", Integer(), nullable=False, server_default="0"),
    Column("undo_of", UuidType(), nullable=True),
    Column("undone_by", UuidType(), nullable=True),
    Column("file_sha256", String(64), nullable=True),
    Column("last_action_id", UuidType(), nullable=True),  # 0015
    # Claimable (Pending/Retrying, oldest first) and Running look-ups.
    Index("ix_operations_status_created_at", "status", "created_at"),
    Index("ix_operations_operation_name", "operation_name"),
)

# Duplicate look-ups and the fileSha256 filter (0017).
Index("ix_operations_file_sha256", operations.c.file_sha256)
# Listing pages newest first with id as the tie-breaker.
Index("ix_operations_created_at_id", operations.c.created_at.desc(), operations.c.id)
# A tenant's list pages, and its active count at each create under a limit (0011); both
# read only that tenant's entries. Partial: operations without a tenant cost nothing here
# (their creator's active count reads the status index: active operations are few).
TENANTED = "tenant IS NOT NULL"
Index(
    "ix_operations_tenant_created_at",
    operations.c.tenant,
    operations.c.created_at.desc(),
    operations.c.id,
    sqlite_where=text(TENANTED),
    postgresql_where=text(TENANTED),
)
Index(
    "ix_operations_tenant_status",
    operations.c.tenant,
    operations.c.status,
    sqlite_where=text(TENANTED),
    postgresql_where=text(TENANTED),
)

# The condition of the partial state index of row records.
NOT_COMPLETED = f"state <> '{RowState.COMPLETED.value}'"

row_records = Table(
    "row_records",
    metadata,
    # No foreign key (0008): every write updates the operation's row first in the same
    # transaction, and a key check per inserted row cost PostgreSQL as much as the insert.
    Column("operation_id", UuidType(), primary_key=True),
    Column("row_number", Integer(), primary_key=True),
    Column("state", EnumText(RowState), nullable=False),
    Column("row_id", String(200), nullable=True),
    Column("step_index", Integer(), nullable=False),
    Column("step_name", String(200), nullable=True),
    Column("error_type", EnumText(ErrorType), nullable=True),
    Column("error_message", Text(), nullable=True),
    Column("retry_attempt", Integer(), nullable=False),
    Column("signal_key", String(500), nullable=True),
    Column("row_data", JsonType, nullable=True),
    # StepState.to_json() dicts; NULL for row-based operations (no steps) to save space.
    Column("steps", JsonType, nullable=True),
    Column("waiting_since", UtcDateTime(), nullable=True),
    Column("completed_at", UtcDateTime(), nullable=True),
    # A page of one state in row order reads this index in order (0006). Completed rows
    # are left out (0009): the bulk of every import, never looked up by that state alone
    # (their pages follow the primary key). Queries for other states say state <> the
    # Completed value too, so SQLite knows the index holds every row they want.
    Index(
        "ix_row_records_operation_id_state_row_number",
        "operation_id",
        "state",
        "row_number",
        sqlite_where=text(NOT_COMPLETED),
        postgresql_where=text(NOT_COMPLETED),
    ),
    # Partial: only rows waiting for a signal have a key, so the hot-path inserts of every
    # other row skip this index. Prefix and equality look-ups on signal_key imply NOT NULL,
    # so both databases still use it.
    Index(
        "ix_row_records_operation_id_signal_key",
        "operation_id",
        "signal_key",
        sqlite_where=text("signal_key IS NOT NULL"),
        postgresql_where=text("signal_key IS NOT NULL"),
    ),
)

# Plain completions (0018): rows ``first_row`` to ``last_row`` of the operation, Completed
# at their one step (``step_index``; -1 for a dry run's validation) at ``completed_at`` with
# nothing else to keep, one stored row per span instead of one per row. A row is in
# ``row_records`` or in a span, never both: a span's write removes the records of its rows.
# Spans do not overlap, so ordered by ``last_row`` they are in row order too, and the span
# holding row n is the first whose ``last_row`` is at least n.
row_spans = Table(
    "row_spans",
    metadata,
    Column("operation_id", UuidType(), primary_key=True),
    Column("last_row", Integer(), primary_key=True),
    Column("first_row", Integer(), nullable=False),
    Column("step_index", Integer(), nullable=False),
    Column("step_name", String(200), nullable=True),
    Column("completed_at", UtcDateTime(), nullable=False),
)

# The step names Completed rows of an operation carry ('' for none), a superset: a name
# is added in the transaction that stores its first Completed row, and never removed. A
# step filter reads it to know, without scanning the operation, whether Completed rows
# can match (a name missing: only the others can, which the state index holds) or all
# of them do (the only name).
completed_steps = Table(
    "completed_steps",
    metadata,
    Column("operation_id", UuidType(), primary_key=True),
    Column("step_name", String(200), primary_key=True),
)

# The rows whose data a user replaced after they failed (a fix in place), with that data:
# the flag ``fixed`` of their row items, and what an operation created from this one reads
# for them instead of the file's record. Apart from ``row_records`` so that the engine's
# row writes stay as they are.
row_fixes = Table(
    "row_fixes",
    metadata,
    Column("operation_id", UuidType(), primary_key=True),
    Column("row_number", Integer(), primary_key=True),
    Column("row_data", JsonType, nullable=False),
    Column("fixed_at", UtcDateTime(), nullable=False),
    # The row's data before its first fix (0015): ``originalRowData`` of its items.
    Column("original_data", JsonType, nullable=True),
)

events = Table(
    "events",
    metadata,
    # The database assigns sequences, so several processes feed one ordering. On SQLite,
    # AUTOINCREMENT keeps sequences from being reused after the newest events are pruned.
    Column(
        "sequence",
        BigInteger().with_variant(Integer(), "sqlite"),
        Identity(),
        primary_key=True,
    ),
    Column("operation_id", UuidType(), nullable=False),
    Column("operation_name", String(200), nullable=False),
    Column("type", EnumText(EventType), nullable=False),
    Column("severity", EnumText(Severity), nullable=False),
    Column("message", Text(), nullable=False),
    Column("timestamp", UtcDateTime(), nullable=False),
    Column("tenant", String(200), nullable=True),
    # Who caused it (0015): a principal's name, "anonymous" or "system".
    Column("actor", String(200), nullable=False, server_default="system"),
    Index("ix_events_operation_id_sequence", "operation_id", "sequence"),
    Index("ix_events_timestamp", "timestamp"),
    # A tenant's feed (0011); partial, so events of untenanted operations skip it.
    Index(
        "ix_events_tenant_sequence",
        "tenant",
        "sequence",
        sqlite_where=text(TENANTED),
        postgresql_where=text(TENANTED),
    ),
    sqlite_autoincrement=True,
)

retry_history = Table(
    "retry_history",
    metadata,
    Column(
        "id",
        BigInteger().with_variant(Integer(), "sqlite"),
        Identity(),
        primary_key=True,
    ),
    Column(
        "operation_id",
        UuidType(),
        ForeignKey("operations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("row_number", Integer(), nullable=False),
    Column("attempt", Integer(), nullable=False),
    Column("step_index", Integer(), nullable=False),
    Column("step_name", String(200), nullable=True),
    Column("error_type", EnumText(ErrorType), nullable=True),
    Column("error_message", Text(), nullable=True),
    Column("failed_at", UtcDateTime(), nullable=True),
    Index("ix_retry_history_operation_id_row_number", "operation_id", "row_number"),
    sqlite_autoincrement=True,
)

# One row per Idempotency-Key of a create, scoped to the principal that sent it.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("principal", String(200), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("operation_id", UuidType(), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
)

# The starts of rate-limited calls in the current window, shared by every process.
rate_limit_starts = Table(
    "rate_limit_starts",
    metadata,
    Column(
        "id",
        BigInteger().with_variant(Integer(), "sqlite"),
        Identity(),
        primary_key=True,
    ),
    Column("key", String(300), nullable=False),
    Column("started_at", UtcDateTime(), nullable=False),
    Index("ix_rate_limit_starts_key_started_at", "key", "started_at"),
    sqlite_autoincrement=True,
)

# The row ranges of operations split for several workers.
chunks = Table(
    "chunks",
    metadata,
    Column(
        "operation_id",
        UuidType(),
        ForeignKey("operations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("chunk_index", Integer(), primary_key=True),
    Column("first_row", Integer(), nullable=False),
    Column("row_count", Integer(), nullable=False),
    Column("byte_offset", BigInteger(), nullable=False),
    Column("state", EnumText(ChunkState), nullable=False),
    Column("worker_id", String(200), nullable=True),
    Column("heartbeat_at", UtcDateTime(), nullable=True),
    Column("version", Integer(), nullable=False, server_default="0"),
    Column("resume_count", Integer(), nullable=False, server_default="0"),
    # Claims look for chunks that are not done.
    Index("ix_chunks_state", "state"),
)

# The notification outbox: a delivery is stored with the change that causes it and sent by
# a dispatcher, which claims due ones for a while (claimed_until) so a crashed sender's
# deliveries are sent again.
notification_deliveries = Table(
    "notification_deliveries",
    metadata,
    Column("id", UuidType(), primary_key=True),
    Column(
        "operation_id",
        UuidType(),
        ForeignKey("operations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("channel", String(100), nullable=False),
    Column("target", Text(), nullable=False),
    Column("trigger", String(50), nullable=False),
    Column("event", String(50), nullable=False),
    Column("payload", JsonType, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("state", EnumText(DeliveryState), nullable=False),
    Column("attempts", Integer(), nullable=False, server_default="0"),
    Column("next_attempt_at", UtcDateTime(), nullable=True),
    Column("last_status_code", Integer(), nullable=True),
    Column("last_error", Text(), nullable=True),
    Column("delivered_at", UtcDateTime(), nullable=True),
    Column("claimed_by", String(200), nullable=True),
    Column("claimed_until", UtcDateTime(), nullable=True),
    Index("ix_notification_deliveries_state_next", "state", "next_attempt_at"),
    Index("ix_notification_deliveries_operation_id", "operation_id", "created_at"),
)

# Bulk actions (0015): a retry, cancel or restart of every operation a filter matched. The
# matched operations are written as items when the action is created, so a process that
# resumes an action after a crash acts on exactly those, in ``position`` order.
bulk_actions = Table(
    "bulk_actions",
    metadata,
    Column("id", UuidType(), primary_key=True),
    Column("action", String(20), nullable=False),
    Column("filter", JsonType, nullable=False),
    Column("from_step", String(200), nullable=True),
    Column("include_completed", Boolean(), nullable=False, server_default=false()),
    Column("reason", Text(), nullable=True),
    Column("status", String(20), nullable=False),
    Column("matched", Integer(), nullable=False, server_default="0"),
    Column("done", Integer(), nullable=False, server_default="0"),
    Column("skipped", Integer(), nullable=False, server_default="0"),
    Column("failed", Integer(), nullable=False, server_default="0"),
    Column("created_by", String(200), nullable=False),
    Column("tenant", String(200), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("completed_at", UtcDateTime(), nullable=True),
    Column("runner", String(200), nullable=True),
    Column("heartbeat_at", UtcDateTime(), nullable=True),
    Index("ix_bulk_actions_created_at", "created_at"),
    Index("ix_bulk_actions_status", "status"),
)

bulk_action_items = Table(
    "bulk_action_items",
    metadata,
    Column("action_id", UuidType(), primary_key=True),
    Column("position", Integer(), primary_key=True),
    Column("operation_id", UuidType(), nullable=False),
    Column("outcome", String(20), nullable=False),  # pending | done | skipped | failed
    Column("reason", Text(), nullable=True),
)


# Saved column mappings (0017): a name per operation and tenant ("" for operations without
# a tenant: a primary key column cannot be NULL).
saved_mappings = Table(
    "saved_mappings",
    metadata,
    Column("tenant", String(200), primary_key=True),
    Column("operation_name", String(200), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("column_map", JsonType, nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
)


def not_completed() -> ColumnElement[bool]:
    """The condition of the partial state index, as a query term. The value is a literal:
    SQLite uses a partial index only for a query that repeats its condition, and a bound
    parameter does not."""
    return row_records.c.state != literal_column(f"'{RowState.COMPLETED.value}'")
