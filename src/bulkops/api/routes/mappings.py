"""Saved column mappings of an operation, per tenant: /api/operations/{name}/mappings."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response
from pydantic import Field

from bulkops.api.deps import RuntimeDep, TenantDep
from bulkops.api.schemas import Schema, error_responses
from bulkops.errors import BadRequest
from bulkops.storage.records import SavedMapping

router = APIRouter(prefix="/api/operations", tags=["operations"])


class MappingSchema(Schema):
    """A saved column mapping: file column -> row column, under a name."""

    name: str
    column_map: dict[str, str]

    @classmethod
    def of(cls, mapping: SavedMapping) -> MappingSchema:
        """Map a stored mapping."""
        return cls(name=mapping.name, column_map=mapping.column_map)


class MappingRequest(Schema):
    """Body of a save: the column map to keep."""

    column_map: dict[str, str] = Field(min_length=1)


# A mapping's name as ``check_name`` takes it, stated in the description only: the service
# answers a name outside it with its own 400, which says what a name may hold.
MappingName = Annotated[
    str, Path(json_schema_extra={"pattern": "^[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}$"})
]


class MappingListSchema(Schema):
    """The caller's tenant's saved mappings of one operation, by name."""

    items: list[MappingSchema]


_BODY = 'Body must be JSON: {"columnMap": {"file column": "row column", ...}}'


@router.get(
    "/{name}/mappings",
    operation_id="getOperationMappings",
    response_model=MappingListSchema,
    responses=error_responses(404),
)
async def get_operation_mappings(
    name: str, runtime: RuntimeDep, tenant: TenantDep
) -> MappingListSchema:
    """The column mappings saved for the operation by the caller's tenant, by name."""
    found = await runtime.mappings.list(name, tenant)
    return MappingListSchema(items=[MappingSchema.of(m) for m in found])


@router.get(
    "/{name}/mappings/{mapping}",
    operation_id="getOperationMapping",
    response_model=MappingSchema,
    responses=error_responses(404),
)
async def get_operation_mapping(
    name: str, mapping: MappingName, runtime: RuntimeDep, tenant: TenantDep
) -> MappingSchema:
    """One saved column mapping."""
    return MappingSchema.of(await runtime.mappings.get(name, mapping, tenant))


@router.put(
    "/{name}/mappings/{mapping}",
    operation_id="saveOperationMapping",
    response_model=MappingSchema,
    responses=error_responses(400, 404, 422),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": MappingRequest.model_json_schema(by_alias=True)}
            },
        }
    },
)
async def save_operation_mapping(
    name: str, mapping: MappingName, request: Request, runtime: RuntimeDep, tenant: TenantDep
) -> MappingSchema:
    """Save a column mapping under a name (replacing one of that name); 422 when it does
    not fit the operation's columns. Create and validate use it as ``mapping=<name>``."""
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest(_BODY) from None
    if not isinstance(body, dict) or "columnMap" not in body:
        raise BadRequest(_BODY)
    saved = await runtime.mappings.save(name, mapping, body["columnMap"], tenant)
    return MappingSchema.of(saved)


@router.delete(
    "/{name}/mappings/{mapping}",
    operation_id="deleteOperationMapping",
    status_code=204,
    response_class=Response,
    responses=error_responses(404),
)
async def delete_operation_mapping(
    name: str, mapping: MappingName, runtime: RuntimeDep, tenant: TenantDep
) -> Response:
    """Remove a saved column mapping."""
    await runtime.mappings.delete(name, mapping, tenant)
    return Response(status_code=204)
