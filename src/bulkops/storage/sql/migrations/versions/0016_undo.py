"""Undo: an undo operation names the operation it undoes, and that one names its undo.

``operations.undo_of`` (the operation an undo operation undoes) and ``operations.undone_by``
(the undo operation of an undone one), both nullable: operations stored before are
neither.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")


def upgrade() -> None:
    """Add ``operations.undo_of`` and ``operations.undone_by``."""
    op.add_column("operations", sa.Column("undo_of", UUID, nullable=True))
    op.add_column("operations", sa.Column("undone_by", UUID, nullable=True))


def downgrade() -> None:
    """Drop both columns."""
    op.drop_column("operations", "undone_by")
    op.drop_column("operations", "undo_of")
