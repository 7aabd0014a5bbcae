"""Bulk actions: POST /api/actions (preview or start), GET /api/actions,
GET /api/actions/{id}, POST /api/actions/{id}/cancel."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse

from bulkops.api.action_schemas import (
    ActionDetailSchema,
    ActionPreviewSchema,
    ActionRequestSchema,
    ActionSchema,
)
from bulkops.api.actor import ActorDep
from bulkops.api.deps import Page, PageSize, RuntimeDep, TenantDep
from bulkops.api.schemas import PageSchema, error_responses
from bulkops.errors import BadRequest, NotFound
from bulkops.service.queries import clamp_paging

router = APIRouter(prefix="/api/actions", tags=["actions"])


def inline_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its ``$defs`` put in place (a request body declared by
    hand has no components of its own to refer to)."""
    schema = model.model_json_schema(by_alias=True)
    defs: dict[str, Any] = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


async def action_id(
    id: Annotated[str, Path(description="The action's GUID", json_schema_extra={"format": "uuid"})],
) -> uuid.UUID:
    """The ``{id}`` path parameter: a GUID, else 404."""
    try:
        return uuid.UUID(id)
    except ValueError:
        raise NotFound(f"Action {id} not found") from None


ActionId = Annotated[uuid.UUID, Depends(action_id)]


@router.post(
    "",
    operation_id="createAction",
    status_code=202,
    response_model=ActionSchema,
    response_model_exclude_none=True,
    responses={
        200: {"model": ActionPreviewSchema, "description": "The preview (preview: true)"},
        202: {
            "description": "The action, started",
            "links": {
                "GetAction": {
                    "operationId": "getAction",
                    "parameters": {"id": "$response.body#/id"},
                },
                "CancelAction": {
                    "operationId": "cancelAction",
                    "parameters": {"id": "$response.body#/id"},
                },
            },
        },
        **error_responses(400),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": inline_schema(ActionRequestSchema)}},
        }
    },
)
async def create_action(
    request: Request, runtime: RuntimeDep, tenant: TenantDep, actor: ActorDep
) -> JSONResponse:
    """Retry, cancel or restart every operation the filter matches (the caller's tenant's
    only). ``preview: true`` answers 200 with how many it matches and the first 25, acting
    on none; otherwise 202 with the action, which runs in the background at
    ``BULKOPS_ACTION_RATE`` operations per second. An empty filter is 400."""
    try:
        raw = await request.json()
    except ValueError:
        raise BadRequest(_BODY) from None
    try:
        body = ActionRequestSchema.model_validate(raw)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise BadRequest(f"Invalid action: {problems}") from None
    wanted = body.to_request()
    if body.preview:
        found = await runtime.actions.preview(wanted, tenant)
        ids = list(found.operation_ids)
        preview = ActionPreviewSchema(matched=found.matched, operation_ids=ids)
        return JSONResponse(preview.model_dump(mode="json", by_alias=True))
    record = await runtime.actions.start(wanted, created_by=actor, tenant=tenant)
    schema = ActionSchema.of(record)
    return JSONResponse(
        schema.model_dump(mode="json", by_alias=True, exclude_none=True),
        status_code=202,
        headers={"Location": f"/api/actions/{record.id}"},
    )


_BODY = 'Body must be JSON: {"action": "retry", "filter": {"status": ["CompletedWithErrors"]}}'


@router.get(
    "",
    operation_id="getActions",
    response_model=PageSchema[ActionSchema],
    response_model_exclude_none=True,
)
async def get_actions(
    runtime: RuntimeDep, tenant: TenantDep, page: Page = None, page_size: PageSize = None
) -> PageSchema[ActionSchema]:
    """Bulk actions, newest first (a caller with a tenant: its tenant's only)."""
    number, size = clamp_paging(page, page_size)
    found = await runtime.actions.list(tenant, number, size)
    return PageSchema.build(found, [ActionSchema.of(record) for record in found.items])


@router.get(
    "/{id}",
    operation_id="getAction",
    response_model=ActionDetailSchema,
    response_model_exclude_none=True,
    responses=error_responses(404),
)
async def get_action(
    runtime: RuntimeDep, tenant: TenantDep, found_id: ActionId
) -> ActionDetailSchema:
    """An action, its progress and the operations it skipped or failed on, each with the
    reason."""
    detail = await runtime.actions.get(found_id, tenant)
    return ActionDetailSchema.of_detail(detail)


@router.post(
    "/{id}/cancel",
    operation_id="cancelAction",
    response_model=ActionSchema,
    response_model_exclude_none=True,
    responses=error_responses(404, 409),
)
async def cancel_action(runtime: RuntimeDep, tenant: TenantDep, found_id: ActionId) -> ActionSchema:
    """Stop a Running action: operations not acted on yet are left as they are; 409 when
    it already ended."""
    return ActionSchema.of(await runtime.actions.cancel(found_id, tenant))
