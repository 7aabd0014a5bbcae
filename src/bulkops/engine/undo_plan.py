"""Which steps of a row of a finished operation an undo undoes, and in what order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bulkops.definition.operation import OperationDefinition, StepDefinition
from bulkops.storage.records import StepState
from bulkops.storage.states import RowState


class Outcome(Protocol):
    """What the plan reads of a row: a ``RowRecord`` or a ``RowOutcome``."""

    @property
    def state(self) -> RowState:
        """The row's state."""
        ...

    @property
    def steps(self) -> Sequence[StepState]:
        """Its per-step progress (a pipeline's)."""
        ...


def undo_plan(definition: OperationDefinition, record: Outcome) -> list[StepDefinition]:
    """The steps to undo for a row of the undone operation, in the order they are undone
    (reverse step order): the steps it completed that define an undo. A row or batch
    operation's row has one, ``process``, when it completed and ``undo_row`` is defined."""
    if not definition.is_step_based:
        done = definition.undo_row and record.state is RowState.COMPLETED
        return [definition.steps[0]] if done else []
    if record.state is RowState.COMPLETED:
        completed = {step.index for step in definition.steps}
    else:
        completed = {state.index for state in record.steps if state.state is RowState.COMPLETED}
    return [
        step
        for step in reversed(definition.steps)
        if step.index in completed and step.undo_name is not None
    ]
