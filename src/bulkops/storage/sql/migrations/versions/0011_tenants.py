"""Tenants: the tenant stamped on each operation and its events, and their indexes (a
tenant's list, its active count, its feed).

Both columns are nullable: operations created before, or by unscoped principals, have no
tenant. The indexes are partial (tenant IS NOT NULL), so a service without tenants pays
nothing for them on writes.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANTED = sa.text("tenant IS NOT NULL")


def upgrade() -> None:
    """Add ``operations.tenant`` and ``events.tenant`` with their partial indexes."""
    with op.batch_alter_table("operations") as batch:
        batch.add_column(sa.Column("tenant", sa.String(200), nullable=True))
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("tenant", sa.String(200), nullable=True))
    op.create_index(
        "ix_operations_tenant_created_at",
        "operations",
        ["tenant", sa.literal_column("created_at DESC"), "id"],
        sqlite_where=TENANTED,
        postgresql_where=TENANTED,
    )
    op.create_index(
        "ix_operations_tenant_status",
        "operations",
        ["tenant", "status"],
        sqlite_where=TENANTED,
        postgresql_where=TENANTED,
    )
    op.create_index(
        "ix_events_tenant_sequence",
        "events",
        ["tenant", "sequence"],
        sqlite_where=TENANTED,
        postgresql_where=TENANTED,
    )


def downgrade() -> None:
    """Drop the tenant columns and their indexes."""
    op.drop_index("ix_events_tenant_sequence", table_name="events")
    op.drop_index("ix_operations_tenant_status", table_name="operations")
    op.drop_index("ix_operations_tenant_created_at", table_name="operations")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("tenant")
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("tenant")
