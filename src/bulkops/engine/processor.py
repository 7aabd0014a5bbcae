"""The processor: the engine's context, built once per processing process."""

from __future__ import annotations

from bulkops.engine.context import EngineContext, ProcessorConfig, Stores
from bulkops.engine.instance import OperationFailed
from bulkops.engine.scope import StopReason

__all__ = [
    "EngineContext",
    "OperationFailed",
    "Processor",
    "ProcessorConfig",
    "StopReason",
    "Stores",
]


class Processor(EngineContext):
    """What every run of one processing process receives (the stores, settings, retries,
    row slots, the writer, row helpers and the heartbeat), as the composition root builds
    it; its dispatcher (``engine/dispatcher.py``) starts the runs."""
