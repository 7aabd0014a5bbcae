"""Initial schema: operations, row_records, events.

Revision ID: 0001
Revises:
Create Date: 2024-11-21

Plain column types on purpose: a migration must keep producing the same DDL even when the
application's Python-side types (``bulkops.storage.sql.types``) change later.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ENUM = sa.String(32)
SEQUENCE = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the three tables and their indexes."""
    op.create_table(
        "operations",
        sa.Column("id", UUID, nullable=False),
        sa.Column("operation_name", sa.String(200), nullable=False),
        sa.Column("status", ENUM, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("file_id", sa.String(200), nullable=False),
        sa.Column("file_name", sa.Text(), nullable=False),
        sa.Column("file_size", sa.BigInteger(), nullable=False),
        sa.Column("file_format", sa.String(16), nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("notifications", JSON, nullable=True),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("completed_at", TIMESTAMP, nullable=True),
        sa.Column("total_rows", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("processed_rows", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("successful_rows", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("error_count", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("retry_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("version", sa.Integer(), server_default="0", nullable=False),
        sa.Column("worker_id", sa.String(200), nullable=True),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_operations"),
    )
    op.create_index(
        "ix_operations_created_at_id",
        "operations",
        [sa.literal_column("created_at DESC"), "id"],
    )
    op.create_index("ix_operations_status_created_at", "operations", ["status", "created_at"])
    op.create_index("ix_operations_operation_name", "operations", ["operation_name"])

    op.create_table(
        "row_records",
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("row_number", sa.Integer(), nullable=False),
        sa.Column("state", ENUM, nullable=False),
        sa.Column("row_id", sa.String(200), nullable=True),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("step_name", sa.String(200), nullable=True),
        sa.Column("error_type", ENUM, nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("retry_attempt", sa.Integer(), nullable=False),
        sa.Column("signal_key", sa.String(500), nullable=True),
        sa.Column("row_data", JSON, nullable=True),
        sa.Column("steps", JSON, nullable=True),
        sa.Column("waiting_since", TIMESTAMP, nullable=True),
        sa.Column("completed_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["operation_id"],
            ["operations.id"],
            name="fk_row_records_operation_id_operations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("operation_id", "row_number", name="pk_row_records"),
    )
    op.create_index("ix_row_records_operation_id_state", "row_records", ["operation_id", "state"])
    op.create_index(
        "ix_row_records_operation_id_signal_key",
        "row_records",
        ["operation_id", "signal_key"],
        sqlite_where=sa.text("signal_key IS NOT NULL"),
        postgresql_where=sa.text("signal_key IS NOT NULL"),
    )

    op.create_table(
        "events",
        sa.Column("sequence", SEQUENCE, sa.Identity(), nullable=False),
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("operation_name", sa.String(200), nullable=False),
        sa.Column("type", ENUM, nullable=False),
        sa.Column("severity", ENUM, nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("timestamp", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("sequence", name="pk_events"),
        # Never reuse a sequence on SQLite, even after the newest events are pruned.
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_operation_id_sequence", "events", ["operation_id", "sequence"])
    op.create_index("ix_events_timestamp", "events", ["timestamp"])


def downgrade() -> None:
    """Drop everything ``upgrade`` created."""
    op.drop_table("events")
    op.drop_table("row_records")
    op.drop_table("operations")
