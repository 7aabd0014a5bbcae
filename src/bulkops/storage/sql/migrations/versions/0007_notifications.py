"""The notification outbox.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Create ``notification_deliveries``."""
    op.create_table(
        "notification_deliveries",
        sa.Column("id", UUID, nullable=False),
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("channel", sa.String(100), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("trigger", sa.String(50), nullable=False),
        sa.Column("event", sa.String(50), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered_at", TIMESTAMP, nullable=True),
        sa.Column("claimed_by", sa.String(200), nullable=True),
        sa.Column("claimed_until", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["operation_id"],
            ["operations.id"],
            name="fk_notification_deliveries_operation_id_operations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notification_deliveries"),
    )
    op.create_index(
        "ix_notification_deliveries_state_next",
        "notification_deliveries",
        ["state", "next_attempt_at"],
    )
    op.create_index(
        "ix_notification_deliveries_operation_id",
        "notification_deliveries",
        ["operation_id", "created_at"],
    )


def downgrade() -> None:
    """Drop ``notification_deliveries``."""
    op.drop_index("ix_notification_deliveries_operation_id", table_name="notification_deliveries")
    op.drop_index("ix_notification_deliveries_state_next", table_name="notification_deliveries")
    op.drop_table("notification_deliveries")
