"""Request-scoped access to the runtime and common parameters."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, Request

from bulkops.errors import NotFound
from bulkops.runtime import Runtime


# Plain async functions: FastAPI would run a sync dependency in a worker thread on every
# request.
async def get_runtime(request: Request) -> Runtime:
    """The runtime the app was started with."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def operation_id(id: str) -> uuid.UUID:
    """The ``{id}`` path parameter: a GUID, else 404 (malformed ids name no operation)."""
    try:
        return uuid.UUID(id)
    except ValueError:
        raise NotFound(f"Operation {id} not found") from None


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
OperationId = Annotated[uuid.UUID, Depends(operation_id)]
