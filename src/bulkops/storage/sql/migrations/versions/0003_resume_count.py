"""Resumption: how many times an operation was resumed after its worker stopped.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``operations.resume_count``."""
    with op.batch_alter_table("operations") as batch:
        batch.add_column(
            sa.Column("resume_count", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    """Drop ``operations.resume_count``."""
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("resume_count")
