"""Row records by operation, state and row number: pages of one state in row order.

The index of 0001 on (operation_id, state) found a state's rows, but not in row-number
order, so a page of failed rows of a large operation sorted them all (SQLite walked the
primary key over the whole operation instead). With row_number last, a page of any state
is read in order and stops at its page size.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Replace the (operation_id, state) index by (operation_id, state, row_number)."""
    op.drop_index("ix_row_records_operation_id_state", table_name="row_records")
    op.create_index(
        "ix_row_records_operation_id_state_row_number",
        "row_records",
        ["operation_id", "state", "row_number"],
    )


def downgrade() -> None:
    """Back to the (operation_id, state) index."""
    op.drop_index("ix_row_records_operation_id_state_row_number", table_name="row_records")
    op.create_index("ix_row_records_operation_id_state", "row_records", ["operation_id", "state"])
