"""Usage: GET /api/usage, each tenant's operations, rows and stored bytes by day."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, Query

from bulkops.api.deps import RuntimeDep, TenantDep
from bulkops.api.schemas import Schema
from bulkops.service.usage import USAGE_DAYS

router = APIRouter(tags=["usage"])


class UsageDaySchema(Schema):
    """One tenant's use on one UTC day, by the day its operations were created."""

    tenant: str | None = None
    day: date
    operations_created: int
    rows_submitted: int
    rows_processed: int
    bytes_stored: int


class UsageSchema(Schema):
    """Use by tenant and day over the last ``days`` days, newest day first."""

    days: int
    items: list[UsageDaySchema]


@router.get(
    "/api/usage",
    operation_id="getUsage",
    response_model=UsageSchema,
    response_model_exclude_none=True,
)
async def get_usage(
    runtime: RuntimeDep,
    caller_tenant: TenantDep,
    tenant: Annotated[
        str | None, Query(max_length=200, description="Only this tenant's use")
    ] = None,
) -> UsageSchema:
    """Per tenant and UTC day over the last 30 days: operations created, rows submitted,
    rows processed and bytes stored (needs operate access; a caller with a tenant sees
    its own tenant's use only). Days without operations are left out."""
    chosen = caller_tenant if caller_tenant is not None else tenant
    if caller_tenant is not None and tenant is not None and tenant != caller_tenant:
        return UsageSchema(days=USAGE_DAYS, items=[])
    found = await runtime.usage.usage(chosen)
    return UsageSchema(days=USAGE_DAYS, items=[UsageDaySchema.from_record(d) for d in found])
