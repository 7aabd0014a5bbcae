"""Dry runs, rows fixed in place, and operations created from an earlier one.

``operations`` gains ``dry_run`` (validate every row, run nothing) and
``source_operation_id`` (the operation whose stored file, with its fixed rows' data, this
one reads). ``row_fixes`` holds the rows whose data a user replaced after they failed: a
table of its own, so the engine's row writes to ``row_records`` stay as they were.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Add the two operation columns and ``row_fixes``."""
    # Plain ALTER TABLE ADD COLUMN on both databases (a batch copy of the table on SQLite
    # would rebuild its indexes from reflection, losing their order and conditions).
    op.add_column(
        "operations",
        sa.Column("dry_run", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("operations", sa.Column("source_operation_id", UUID, nullable=True))
    op.create_table(
        "row_fixes",
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("row_number", sa.Integer(), nullable=False),
        sa.Column("row_data", JSON, nullable=False),
        sa.Column("fixed_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("operation_id", "row_number", name="pk_row_fixes"),
    )


def downgrade() -> None:
    """Drop ``row_fixes`` and the two operation columns."""
    op.drop_table("row_fixes")
    op.drop_column("operations", "source_operation_id")
    op.drop_column("operations", "dry_run")
