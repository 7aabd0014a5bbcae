"""Request-scoped access to the runtime, access control and common parameters."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from pydantic import BeforeValidator
from starlette.convertors import CONVERTOR_TYPES, StringConvertor, register_url_convertor

from bulkops.api.auth import AccessControl
from bulkops.errors import NotFound
from bulkops.runtime import Runtime


# Plain async functions: FastAPI would run a sync dependency in a worker thread on every
# request.
async def get_runtime(request: Request) -> Runtime:
    """The runtime the app was started with."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_access(request: Request) -> AccessControl:
    """The app's access control (policies, attribution)."""
    access: AccessControl = request.app.state.access
    return access


async def caller_tenant(request: Request) -> str | None:
    """The caller's tenant (None: it sees every tenant), found once per request."""
    access: AccessControl = request.app.state.access
    return await access.tenant_of(request)


async def operation_in_scope(request: Request) -> None:
    """Every route of one operation (an ``{id}`` path parameter under ``/api/``) answers
    404 for another tenant's operation, before the route runs.

    Installed on the whole app, so a route added later is scoped without asking for it.
    Unscoped callers cost nothing here; a scoped caller's operation is read once more.
    """
    raw = request.path_params.get("id")
    if raw is None or not _api_path(request) or _action_path(request):
        return
    tenant = await caller_tenant(request)
    if tenant is None:
        return
    try:
        wanted = uuid.UUID(str(raw))
    except ValueError:
        raise NotFound(f"Operation {raw} not found") from None
    runtime: Runtime = request.app.state.runtime
    await runtime.queries.get(wanted, tenant=tenant)


def _action_path(request: Request) -> bool:
    # /api/actions/{id} names a bulk action, scoped by its own routes.
    path: str = request.scope["path"]
    return "/api/actions/" in path


def _api_path(request: Request) -> bool:
    path: str = request.scope["path"]
    root: str = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path.startswith("/api/")


async def operation_id(
    id: Annotated[
        str, Path(description="The operation's GUID", json_schema_extra={"format": "uuid"})
    ],
) -> uuid.UUID:
    """The ``{id}`` path parameter: a GUID, else 404 (malformed ids name no operation)."""
    try:
        return uuid.UUID(id)
    except ValueError:
        raise NotFound(f"Operation {id} not found") from None


class BulkIdConvertor(StringConvertor):
    """``{id:bulk_id}``: any path segment except ``validate``.

    ``/api/bulks/validate`` is the POST-only validate route; without this, GET on it would
    be read as the detail of an operation named "validate" (404) instead of 405.
    """

    regex = "(?!validate$)[^/]+"


if "bulk_id" not in CONVERTOR_TYPES:
    register_url_convertor("bulk_id", BulkIdConvertor())

_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _date_time_text(value: Any) -> Any:
    # pydantic would also take a bare number (Unix time) or a date; the contract says
    # ISO 8601 instants, so anything else is a 400.
    if isinstance(value, str) and not _DATE_TIME.match(value.strip()):
        raise ValueError("expected an ISO 8601 date-time such as 2024-05-01T12:00:00Z")
    return value


IsoDateTime = Annotated[datetime, BeforeValidator(_date_time_text)]
# Integer query values are bounded so that no value can overflow a database integer (page
# numbers multiply by the page size): out of range is a 400, not a storage failure.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
Page = Annotated[
    int | None,
    Query(ge=INT32_MIN, le=INT32_MAX, description="1-based page (default 1; below 1 means 1)"),
]
PageSize = Annotated[
    int | None,
    Query(
        alias="pageSize",
        ge=INT32_MIN,
        le=INT32_MAX,
        description="Items per page (default 25, clamped to 1..1000)",
    ),
]
# Row numbers are stored as 32-bit integers.
RowNumber = Annotated[
    int | None, Query(alias="rowNumber", ge=INT32_MIN, le=INT32_MAX, description="Row number")
]
After = Annotated[
    int | None,
    Query(
        ge=0,
        le=INT32_MAX,
        description="Keyset paging: rows numbered above this (the previous page's "
        "`nextAfter`); `page` is then ignored",
    ),
]
Since = Annotated[
    int | None,
    Query(ge=INT64_MIN, le=INT64_MAX, description="Exclusive sequence cursor"),
]
Limit = Annotated[
    int | None,
    Query(ge=INT32_MIN, le=INT32_MAX, description="At most this many (default 100, 1..1000)"),
]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
AccessDep = Annotated[AccessControl, Depends(get_access)]
OperationId = Annotated[uuid.UUID, Depends(operation_id)]
TenantDep = Annotated[str | None, Depends(caller_tenant)]
