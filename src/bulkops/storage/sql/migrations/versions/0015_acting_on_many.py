"""Acting on many: who caused each event, a fixed row's first data, bulk actions.

``events`` gains ``actor`` (existing events were the service's or unattributed:
``"system"``); ``row_fixes`` gains ``original_data`` (the row's data before its first
fix; NULL for fixes made before this revision); ``operations`` gains ``last_action_id``
(the bulk action that last acted on it, written with the act); ``bulk_actions`` and
``bulk_action_items`` hold the actions and the operations each matched.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Add the three columns and the two action tables."""
    op.add_column(
        "events",
        sa.Column("actor", sa.String(200), nullable=False, server_default="system"),
    )
    op.add_column("row_fixes", sa.Column("original_data", JSON, nullable=True))
    op.add_column("operations", sa.Column("last_action_id", UUID, nullable=True))
    op.create_table(
        "bulk_actions",
        sa.Column("id", UUID, nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("filter", JSON, nullable=False),
        sa.Column("from_step", sa.String(200), nullable=True),
        sa.Column("include_completed", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("matched", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("done", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("skipped", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failed", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("tenant", sa.String(200), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("completed_at", TIMESTAMP, nullable=True),
        sa.Column("runner", sa.String(200), nullable=True),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_bulk_actions"),
    )
    op.create_index("ix_bulk_actions_created_at", "bulk_actions", ["created_at"])
    op.create_index("ix_bulk_actions_status", "bulk_actions", ["status"])
    op.create_table(
        "bulk_action_items",
        sa.Column("action_id", UUID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("action_id", "position", name="pk_bulk_action_items"),
    )


def downgrade() -> None:
    """Drop the action tables and the three columns."""
    op.drop_table("bulk_action_items")
    op.drop_index("ix_bulk_actions_status", table_name="bulk_actions")
    op.drop_index("ix_bulk_actions_created_at", table_name="bulk_actions")
    op.drop_table("bulk_actions")
    op.drop_column("operations", "last_action_id")
    op.drop_column("row_fixes", "original_data")
    op.drop_column("events", "actor")
