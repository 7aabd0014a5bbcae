"""bulkops: bulk operations as a service.

Define an operation with a metadata model, a row model and ``process_row``; serve it with
``bulkops serve`` or ``create_app``; process in the background with ``Worker``; put several
services behind one address with ``bulkops gateway`` or ``create_gateway``.
"""

from __future__ import annotations

from bulkops.api.app import create_app
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
    BatchOperation,
    PipelineOperation,
    RowOperation,
    operation,
)
from bulkops.definition.steps import PollingStep, SignalStep, Step, polling_step, signal_step, step
from bulkops.engine.signals import SignalService
from bulkops.errors import BulkOpsError, ValidationError
from bulkops.gateway import GatewaySettings, create_gateway
from bulkops.settings import Settings
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from bulkops.worker import Worker

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
    "operation",
    "polling_step",
    "signal_step",
    "step",
]
