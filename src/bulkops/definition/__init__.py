"""Defining operations: models, the ``@operation`` decorator, field descriptors, registry."""

from __future__ import annotations

from bulkops.definition.fields import FieldDescriptor, describe
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
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
)

__all__ = [
    "FieldDescriptor",
    "Metadata",
    "OperationBase",
    "OperationDefinition",
    "PipelineOperation",
    "PollingStep",
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
]
