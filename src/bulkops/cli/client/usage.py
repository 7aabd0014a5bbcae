"""``bulkops usage``: each tenant's operations, rows and stored bytes by day."""

from __future__ import annotations

from typing import Annotated

import typer

from bulkops.cli.client.common import AsJson, Token, Url, connected, emit
from bulkops.cli.client.listing import Column, show
from bulkops.client.http import DEFAULT_URL
from bulkops.client.models import UsageDay

USAGE_COLUMNS: list[Column[UsageDay]] = [
    Column("day", "Day", lambda d: d.day.isoformat()),
    Column("tenant", "Tenant", lambda d: d.tenant or ""),
    Column("operationsCreated", "Operations", lambda d: str(d.operations_created)),
    Column("rowsSubmitted", "Rows submitted", lambda d: str(d.rows_submitted)),
    Column("rowsProcessed", "Rows processed", lambda d: str(d.rows_processed)),
    Column("bytesStored", "Bytes stored", lambda d: str(d.bytes_stored)),
]


def usage(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's use")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Each tenant's use by day over the last 30 days (needs operate access)."""
    with connected(url, token) as client:
        found = client.get_usage(tenant=tenant)
    summary = f"{len(found.items)} tenant days over the last {found.days} days"
    emit(found, as_json, lambda: show(found.items, USAGE_COLUMNS, summary))
