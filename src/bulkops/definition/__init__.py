"""Defining operations: models, the ``@operation`` decorator, field descriptors, registry."""

from __future__ import annotations

from bulkops.definition.fields import FieldDescriptor, describe
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import (
    OperationBase,
    OperationDefinition,
    RowOperation,
    StepDefinition,
    definition_of,
    operation,
)
from bulkops.definition.registry import Registry, load_registry

__all__ = [
    "FieldDescriptor",
    "Metadata",
    "OperationBase",
    "OperationDefinition",
    "Registry",
    "Row",
    "RowOperation",
    "StepDefinition",
    "definition_of",
    "describe",
    "load_registry",
    "operation",
]
