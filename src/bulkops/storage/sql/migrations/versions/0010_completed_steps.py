"""The step names of each operation's Completed rows.

A ``stepName`` filter could only scan the operation: Completed rows are not in the state
index (0009), so a page of rows at a step no Completed row reached read every row of a
million-row operation (about 140 ms) to return nothing. ``completed_steps`` lists the
names Completed rows carry, so such a filter reads the state index alone, and a filter
that every Completed row matches counts and pages like the Completed rows.

The upgrade fills it from the rows already stored: one pass over ``row_records``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")


def upgrade() -> None:
    """Create ``completed_steps`` and list the names of the Completed rows stored."""
    op.create_table(
        "completed_steps",
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("step_name", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("operation_id", "step_name", name="pk_completed_steps"),
    )
    op.execute(
        "INSERT INTO completed_steps (operation_id, step_name) "
        "SELECT DISTINCT operation_id, COALESCE(step_name, '') FROM row_records "
        "WHERE state = 'Completed'"
    )


def downgrade() -> None:
    """Drop ``completed_steps``."""
    op.drop_table("completed_steps")
