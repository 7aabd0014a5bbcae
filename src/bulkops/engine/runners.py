"""Which runner runs an operation's rows: plain rows, steps, batches, an undo or a dry run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bulkops.definition.models import Metadata
from bulkops.definition.operation import OperationBase, OperationDefinition
from bulkops.engine.batches import BatchRunner
from bulkops.engine.pipeline import PipelineRunner
from bulkops.engine.rows import RowRunner
from bulkops.engine.undo import UndoRowRunner, UndoRunner
from bulkops.storage.records import Fence, OperationRecord

if TYPE_CHECKING:
    from bulkops.engine.context import EngineContext
    from bulkops.engine.pacing import Pacer


def runner_for(
    context: EngineContext,
    record: OperationRecord,
    definition: OperationDefinition,
    instance: OperationBase[Any, Any],
    metadata: Metadata,
    *,
    pacer: Pacer,
    fence: Fence,
) -> BatchRunner | RowRunner | PipelineRunner:
    """The runner of the operation's rows (but a dry run's, which ``Run.prepare`` builds):
    an undo runs row by row whatever the kind (its rows' undos in reverse step order, or a
    row operation's ``undo_row``); steps run in a pipeline; batches together; else row by
    row."""
    basics = (definition, instance, metadata, record.id)
    created_by = record.created_by
    undo = record.undo_of is not None
    if definition.is_batch and not undo:
        return BatchRunner(*basics, pacer=pacer, created_by=created_by)
    if not definition.is_step_based:
        row_runner = UndoRowRunner if undo else RowRunner
        return row_runner(*basics, pacer=pacer, created_by=created_by)
    config = context.config
    return (UndoRunner if undo else PipelineRunner)(
        *basics,
        pacer=pacer,
        created_by=created_by,
        rows=context.stores.rows,
        hub=context.hub,
        fence=fence,
        retry=context.retry,
        signal_poll_interval=config.signal_poll_interval,
        retry_delay=config.step_retry_delay,
        metrics=context.metrics,
    )
