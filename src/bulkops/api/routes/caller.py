"""Who is calling: GET /api/me, for the dashboard's header.

Left out of the API description: the description is the HTTP contract, and this route is
the dashboard's (like its pages), not part of it.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from bulkops.api.auth import principal_of
from bulkops.api.deps import TenantDep
from bulkops.api.schemas import CallerSchema

router = APIRouter(tags=["caller"], include_in_schema=False)


@router.get(
    "/api/me",
    operation_id="getCaller",
    response_model=CallerSchema,
    response_model_exclude_none=True,
)
async def get_caller(request: Request, tenant: TenantDep) -> CallerSchema:
    """The caller's name (absent when anonymous) and tenant (absent when it sees every
    tenant's operations)."""
    principal = principal_of(request)
    return CallerSchema(name=principal.name if principal else None, tenant=tenant)
