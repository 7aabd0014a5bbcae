"""Defining operations: models, the ``@operation`` decorator, field descriptors, registry."""

from __future__ import annotations

from bulkops.definition.controls import OperationControls, RateLimit
from bulkops.definition.fields import FieldDescriptor, describe
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
    BatchOperation,
    OperationBase,
    OperationDefinition,
    PipelineOperation,
    RowOperation,
    StepDefinition,
    definition_of,
    operation,
)
from bulkops.definition.registry import Registry, load_registry
from bulkops.definition.steps import (
    PollingStep,
    SignalStep,
    Step,
    StepKind,
    polling_step,
    signal_step,
    step,
    undo_step,
)

__all__ = [
    "BatchOperation",
    "FieldDescriptor",
    "Metadata",
    "OperationBase",
    "OperationControls",
    "OperationDefinition",
    "PipelineOperation",
    "PollingStep",
    "RateLimit",
    "Registry",
    "Row",
    "RowOperation",
    "SignalStep",
    "Step",
    "StepDefinition",
    "StepKind",
    "definition_of",
    "describe",
    "load_registry",
    "operation",
    "polling_step",
    "signal_step",
    "step",
    "undo_step",
]
