"""A pipeline's steps bound to one operation instance, and what a step's failure is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bulkops.definition.operation import OperationBase, OperationDefinition, StepDefinition
from bulkops.definition.steps import StepKind
from bulkops.storage.states import ErrorType

# Why a step of a row failed: its error type and message.
Failure = tuple[ErrorType, str]


@dataclass(frozen=True, slots=True)
class BoundStep:
    """A step with its callables bound to one operation instance."""

    definition: StepDefinition
    action: Callable[..., Any]
    key: Callable[..., Any] | None = None
    check: Callable[..., Any] | None = None


def bind_steps(
    definition: OperationDefinition, instance: OperationBase[Any, Any]
) -> list[BoundStep]:
    """Resolve each step's action, key and check on ``instance``."""
    objects = {}
    if any(step.method_name is None for step in definition.steps):
        objects = {item.name: item for item in instance.steps()}  # type: ignore[attr-defined]
    bound = []
    for step in definition.steps:
        if step.method_name is not None:
            check = getattr(instance, step.check_name) if step.check_name else None
            action = getattr(instance, step.method_name)
            bound.append(BoundStep(step, action, step.key, check))
        else:
            item = objects[step.name]
            key = step.key if step.kind is StepKind.SIGNAL else None
            check = getattr(item, "check", None) if step.kind is StepKind.POLLING else None
            bound.append(BoundStep(step, item.run, key, check))
    return bound
