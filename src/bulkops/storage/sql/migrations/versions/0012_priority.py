"""Fair sharing: the priority of each operation.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``operations.priority`` (0 for every existing operation)."""
    with op.batch_alter_table("operations") as batch:
        batch.add_column(sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    """Drop ``operations.priority``."""
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("priority")
