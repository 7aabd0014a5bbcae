"""Operation controls: column maps and schema versions, idempotency keys, rate-limit starts.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = sa.Uuid().with_variant(sa.String(36), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add the columns and tables of the operation controls."""
    with op.batch_alter_table("operations") as batch:
        batch.add_column(sa.Column("column_map", JSON, nullable=True))
        batch.add_column(sa.Column("schema_version", sa.String(100), nullable=True))
    op.create_table(
        "idempotency_keys",
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("operation_id", UUID, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("principal", "key", name="pk_idempotency_keys"),
    )
    op.create_table(
        "rate_limit_starts",
        sa.Column("id", ID, sa.Identity(), nullable=False),
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_rate_limit_starts"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_rate_limit_starts_key_started_at", "rate_limit_starts", ["key", "started_at"]
    )


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("ix_rate_limit_starts_key_started_at", table_name="rate_limit_starts")
    op.drop_table("rate_limit_starts")
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("schema_version")
        batch.drop_column("column_map")
