"""bulkops: bulk operations as a service.

Define an operation with a metadata model, a row model and ``process_row``; serve it with
``bulkops serve`` or ``create_app``; process in the background with ``Worker``.
"""

from __future__ import annotations

from bulkops.api.app import create_app
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import PipelineOperation, RowOperation, operation
from bulkops.definition.steps import PollingStep, SignalStep, Step, polling_step, signal_step, step
from bulkops.engine.signals import SignalService
from bulkops.errors import BulkOpsError, ValidationError
from bulkops.settings import Settings
from bulkops.storage.states import ErrorType, OperationStatus, RowState
from bulkops.worker import Worker

__version__ = "0.1.0"

__all__ = [
    "BulkOpsError",
    "ErrorType",
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
    "operation",
    "polling_step",
    "signal_step",
    "step",
]
