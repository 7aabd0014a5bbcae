"""Plain completions stored as spans.

Most rows of an import complete at their one step with nothing to keep but their number
and time. They were stored as one ``row_records`` row each; ``row_spans`` stores a run of
them as one row (rows ``first_row`` to ``last_row``, one step, one time), and readers
expand spans into the same Completed row records. Rows stored before stay in
``row_records``; the downgrade writes the spans back into it, so nothing is lost.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
_COLUMNS = "operation_id, row_number, state, step_index, step_name, retry_attempt, completed_at"


def upgrade() -> None:
    """Create ``row_spans``."""
    op.create_table(
        "row_spans",
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("last_row", sa.Integer(), nullable=False),
        sa.Column("first_row", sa.Integer(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("step_name", sa.String(200), nullable=True),
        sa.Column("completed_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("operation_id", "last_row", name="pk_row_spans"),
    )


def downgrade() -> None:
    """Write every span's rows into ``row_records`` as Completed records, then drop it."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"INSERT INTO row_records ({_COLUMNS}) "
            "SELECT s.operation_id, n, 'Completed', s.step_index, s.step_name, 0, "
            "s.completed_at FROM row_spans AS s, generate_series(s.first_row, s.last_row) AS n "
            "ON CONFLICT DO NOTHING"
        )
    else:
        op.execute(
            "WITH RECURSIVE series(operation_id, n, last, step_index, step_name, at) AS ("
            "SELECT operation_id, first_row, last_row, step_index, step_name, completed_at "
            "FROM row_spans UNION ALL SELECT operation_id, n + 1, last, step_index, "
            "step_name, at FROM series WHERE n < last) "
            f"INSERT INTO row_records ({_COLUMNS}) "
            "SELECT operation_id, n, 'Completed', step_index, step_name, 0, at FROM series "
            "WHERE true ON CONFLICT DO NOTHING"
        )
    op.drop_table("row_spans")
