"""Chunks: the row ranges of operations split for several workers.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create ``chunks``."""
    op.create_table(
        "chunks",
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("first_row", sa.Integer(), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("worker_id", sa.String(200), nullable=True),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=True),
        sa.Column("version", sa.Integer(), server_default="0", nullable=False),
        sa.Column("resume_count", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["operation_id"],
            ["operations.id"],
            name="fk_chunks_operation_id_operations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("operation_id", "chunk_index", name="pk_chunks"),
    )
    op.create_index("ix_chunks_state", "chunks", ["state"])


def downgrade() -> None:
    """Drop ``chunks``."""
    op.drop_index("ix_chunks_state", table_name="chunks")
    op.drop_table("chunks")
