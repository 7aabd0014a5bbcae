"""The XLSX worksheet an operation reads gets a column of its own.

Until now a worksheet named at create was kept under a ``"sheet"`` key of the operation's
``notifications`` JSON. ``operations.sheet`` (nullable: None reads the first worksheet)
replaces it; the upgrade moves the stored values out of ``notifications`` (an options
bag left empty becomes NULL, as for an operation created without options) and the
downgrade puts them back. The JSON is read and written in Python, so one code path
serves SQLite's JSON text and PostgreSQL's JSONB alike.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHEET_KEY = "sheet"
UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
operations = sa.table(
    "operations",
    sa.column("id", UUID),
    sa.column("notifications", JSON),
    sa.column("sheet", sa.Text()),
)


def upgrade() -> None:
    """Add ``operations.sheet`` and move each stored worksheet name into it."""
    op.add_column("operations", sa.Column("sheet", sa.Text(), nullable=True))
    conn = op.get_bind()
    found = conn.execute(
        sa.select(operations.c.id, operations.c.notifications).where(
            operations.c.notifications.is_not(None)
        )
    )
    for operation_id, notifications in found.all():
        if not isinstance(notifications, dict) or SHEET_KEY not in notifications:
            continue
        options: dict[str, Any] = dict(notifications)
        sheet = options.pop(SHEET_KEY)
        conn.execute(
            operations.update()
            .where(operations.c.id == operation_id)
            .values(
                sheet=sheet if isinstance(sheet, str) else None,
                notifications=options or None,
            )
        )


def downgrade() -> None:
    """Put each worksheet name back under the ``"sheet"`` key of ``notifications`` and drop
    the column."""
    conn = op.get_bind()
    found = conn.execute(
        sa.select(operations.c.id, operations.c.notifications, operations.c.sheet).where(
            operations.c.sheet.is_not(None)
        )
    )
    for operation_id, notifications, sheet in found.all():
        options = {**(notifications or {}), SHEET_KEY: sheet}
        conn.execute(
            operations.update().where(operations.c.id == operation_id).values(notifications=options)
        )
    op.drop_column("operations", "sheet")
