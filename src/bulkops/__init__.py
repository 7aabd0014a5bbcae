"""bulkops: bulk operations as a service.

Define an operation with a metadata model, a row model and ``process_row``; serve it with
``bulkops serve`` or ``create_app``; process in the background with ``Worker``; put several
services behind one address with ``bulkops gateway`` or ``create_gateway``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
    BatchOperation,
    PipelineOperation,
    RowOperation,
    operation,
)
from bulkops.definition.row_context import RowContext, current_row
from bulkops.definition.steps import (
    PollingStep,
    SignalStep,
    Step,
    polling_step,
    signal_step,
    step,
    undo_step,
)
from bulkops.errors import BulkOpsError, ValidationError
from bulkops.settings import Settings
from bulkops.wire import ErrorType, OperationStatus, RowState

if TYPE_CHECKING:
    from bulkops.api.app import create_app
    from bulkops.gateway import GatewaySettings, create_gateway
    from bulkops.service.signals import SignalService
    from bulkops.worker import Worker

# The serving side (FastAPI, SQLAlchemy, the engine) is imported on first use, so the
# command-line client and ``bulkops.client`` start fast.
_LAZY = {
    "create_app": "bulkops.api.app",
    "SignalService": "bulkops.service.signals",
    "GatewaySettings": "bulkops.gateway",
    "create_gateway": "bulkops.gateway",
    "Worker": "bulkops.worker",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bulkops' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "BatchOperation",
    "BulkOpsError",
    "ErrorType",
    "GatewaySettings",
    "Metadata",
    "OperationStatus",
    "PipelineOperation",
    "PollingStep",
    "Row",
    "RowContext",
    "RowOperation",
    "RowState",
    "Settings",
    "SignalService",
    "SignalStep",
    "Step",
    "ValidationError",
    "Worker",
    "create_app",
    "create_gateway",
    "current_row",
    "operation",
    "polling_step",
    "signal_step",
    "step",
    "undo_step",
]
