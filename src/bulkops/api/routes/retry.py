"""Retry: eligibility, retry all or chosen failed rows, and the retry history."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from bulkops.api.actor import ActorDep
from bulkops.api.deps import (
    INT32_MAX,
    INT32_MIN,
    OperationId,
    Page,
    PageSize,
    RowNumber,
    RuntimeDep,
)
from bulkops.api.schemas import (
    EligibilitySchema,
    PageSchema,
    RetryHistorySchema,
    RetryRequest,
    RetryResultSchema,
    RetryRowsRequest,
    error_responses,
)
from bulkops.errors import BadRequest
from bulkops.service.retry import RetryResult

router = APIRouter(prefix="/api/bulks/{id}/retry", tags=["retry"])

_ERRORS = error_responses(404, 409)


def _result(result: RetryResult) -> RetryResultSchema:
    return RetryResultSchema(
        rows_submitted=result.rows_submitted,
        rows_skipped=result.rows_skipped,
        skipped_reasons=result.skipped_reasons or None,
    )


@router.get(
    "/eligibility",
    operation_id="getRetryEligibility",
    response_model=EligibilitySchema,
    response_model_exclude_none=True,
    responses=error_responses(404),
)
async def get_retry_eligibility(
    operation_id: OperationId, runtime: RuntimeDep
) -> EligibilitySchema:
    """Whether the failed rows may be retried now, and the reason when not."""
    eligibility = await runtime.retries.eligibility(operation_id)
    return EligibilitySchema(is_eligible=eligibility.is_eligible, reason=eligibility.reason)


@router.post(
    "",
    operation_id="retryBulk",
    response_model=RetryResultSchema,
    response_model_exclude_none=True,
    responses=error_responses(400, 404, 409),
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {
                "application/json": {"schema": RetryRequest.model_json_schema(by_alias=True)}
            },
        }
    },
)
async def retry_bulk(
    operation_id: OperationId,
    request: Request,
    runtime: RuntimeDep,
    actor: ActorDep,
    from_step: Annotated[
        str | None,
        Query(alias="fromStep", min_length=1, description="Restart from this pipeline step"),
    ] = None,
    include_completed: Annotated[
        bool | None,
        Query(alias="includeCompleted", description="Restart Completed rows too"),
    ] = None,
) -> RetryResultSchema:
    """Retry every failed row that can be retried; 409 with the reason when refused.

    An optional JSON body ``{"fromStep": name, "includeCompleted": bool}`` (or the same
    query parameters) restarts: the rows run again from that step of a pipeline, with
    ``includeCompleted`` Completed rows too (a Completed operation included)."""
    body = await _optional_body(request)
    restart = _restart(body, from_step, include_completed)
    return _result(await runtime.retries.retry(operation_id, actor=actor, **restart))


@router.post(
    "/rows",
    operation_id="retryBulkRows",
    response_model=RetryResultSchema,
    response_model_exclude_none=True,
    responses=error_responses(400, 404, 409),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": RetryRowsRequest.model_json_schema(by_alias=True)}
            },
        }
    },
)
async def retry_bulk_rows(
    operation_id: OperationId, request: Request, runtime: RuntimeDep, actor: ActorDep
) -> RetryResultSchema:
    """Retry the named failed rows; the others are skipped with a reason each. With
    ``fromStep`` and ``includeCompleted`` in the body, restart them (see ``retryBulk``)."""
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest('Body must be JSON: {"rowNumbers": [1, 2]}') from None
    numbers = body.get("rowNumbers") if isinstance(body, dict) else None
    if not isinstance(numbers, list):
        raise BadRequest('Body must be JSON: {"rowNumbers": [1, 2]}')
    rows = [_row_number(n) for n in numbers]
    restart = _restart(body, None, None)
    return _result(await runtime.retries.retry(operation_id, rows, actor=actor, **restart))


async def _optional_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadRequest(_RESTART_BODY) from None
    if not isinstance(body, dict):
        raise BadRequest(_RESTART_BODY)
    return body


_RESTART_BODY = 'Body must be empty or JSON: {"fromStep": "step name", "includeCompleted": true}'


def _restart(
    body: dict[str, Any], from_step: str | None, include_completed: bool | None
) -> dict[str, Any]:
    """The restart options of a retry request: the body's, else the query's."""
    step = body.get("fromStep", from_step)
    completed = body.get("includeCompleted", include_completed)
    if step is not None and (not isinstance(step, str) or not step):
        raise BadRequest("fromStep must be a step name")
    if completed is not None and not isinstance(completed, bool):
        raise BadRequest("includeCompleted must be true or false")
    return {"from_step": step, "include_completed": bool(completed)}


def _row_number(value: object) -> int:
    # JSON has one number type: 3.0 is the integer 3 (JSON Schema agrees), 3.5 is not.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest("rowNumbers must be a list of row numbers (integers)")
    if not INT32_MIN <= value <= INT32_MAX:
        raise BadRequest(f"Row number {value} is out of range")
    return value


@router.get(
    "/history",
    operation_id="getRetryHistory",
    response_model=PageSchema[RetryHistorySchema],
    response_model_exclude_none=True,
    responses=error_responses(404),
)
async def get_retry_history(
    operation_id: OperationId,
    runtime: RuntimeDep,
    row_number: RowNumber = None,
    page: Page = None,
    page_size: PageSize = None,
) -> PageSchema[RetryHistorySchema]:
    """Error snapshots taken by retries, by row number then attempt."""
    result = await runtime.retries.history(
        operation_id, row_number=row_number, page=page, page_size=page_size
    )
    return PageSchema.build(result, [RetryHistorySchema.from_record(e) for e in result.items])
