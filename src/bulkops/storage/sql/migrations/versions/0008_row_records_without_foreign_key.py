"""Row records without a foreign key to their operation.

PostgreSQL checked the key with a query per inserted row: on a 1,000,000-row import that
was 3.3 s of the server's 7.4 s of CPU for the row inserts. Every write of row records
already updates (and on PostgreSQL locks) the operation's row first in the same
transaction and writes nothing when it is gone, and operations are never deleted, so the
key guarded nothing the writers do not. On SQLite the table is rebuilt without it (a copy
of the table, once).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FOREIGN_KEY = "fk_row_records_operation_id_operations"


def upgrade() -> None:
    """Drop the foreign key of ``row_records.operation_id``."""
    with op.batch_alter_table("row_records") as table:
        table.drop_constraint(FOREIGN_KEY, type_="foreignkey")


def downgrade() -> None:
    """Restore it (every row record must then name a stored operation)."""
    with op.batch_alter_table("row_records") as table:
        table.create_foreign_key(
            FOREIGN_KEY, "operations", ["operation_id"], ["id"], ondelete="CASCADE"
        )
