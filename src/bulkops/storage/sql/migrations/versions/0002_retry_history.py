"""Retry history: one error snapshot per retried row and attempt.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
ENUM = sa.String(32)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create ``retry_history``."""
    op.create_table(
        "retry_history",
        sa.Column("id", ID, sa.Identity(), nullable=False),
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("row_number", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("step_name", sa.String(200), nullable=True),
        sa.Column("error_type", ENUM, nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("failed_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["operation_id"],
            ["operations.id"],
            name="fk_retry_history_operation_id_operations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_retry_history"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_retry_history_operation_id_row_number",
        "retry_history",
        ["operation_id", "row_number"],
    )


def downgrade() -> None:
    """Drop ``retry_history``."""
    op.drop_index("ix_retry_history_operation_id_row_number", table_name="retry_history")
    op.drop_table("retry_history")
