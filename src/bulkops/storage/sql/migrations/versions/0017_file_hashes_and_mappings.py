"""Every stored file's SHA-256, and saved column mappings.

``operations.file_sha256`` (nullable: operations stored before it have no hash, and none
is computed for them) with an index for the duplicate look-up and the ``fileSha256``
filter; ``saved_mappings`` keeps named column maps per tenant and operation.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Add ``operations.file_sha256`` (NULL for existing operations) and ``saved_mappings``."""
    with op.batch_alter_table("operations") as batch:
        batch.add_column(sa.Column("file_sha256", sa.String(64), nullable=True))
    op.create_index("ix_operations_file_sha256", "operations", ["file_sha256"])
    op.create_table(
        "saved_mappings",
        sa.Column("tenant", sa.String(200), nullable=False),
        sa.Column("operation_name", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("column_map", JSON, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "operation_name", "name", name="pk_saved_mappings"),
    )


def downgrade() -> None:
    """Drop ``saved_mappings`` and ``operations.file_sha256``."""
    op.drop_table("saved_mappings")
    op.drop_index("ix_operations_file_sha256", table_name="operations")
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("file_sha256")
