"""The engine's context: what every run of a process receives (stores, tuning, retries, the
rate gate, the signal hub, metrics, row slots and helpers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bulkops.definition.registry import Registry
from bulkops.engine.fair_share import FairShare
from bulkops.engine.helper.pool import RowHelpers
from bulkops.engine.pacing import RateGate
from bulkops.engine.persistence import StorageRetry
from bulkops.engine.signals import SignalHub
from bulkops.engine.writer import RowWriter
from bulkops.formats import FileLimits
from bulkops.observability.metrics import Metrics
from bulkops.storage.liveness import NoLiveness
from bulkops.storage.ports import (
    ChunkStore,
    EventStore,
    FileStore,
    Liveness,
    OperationStore,
    RateLimitStore,
    RowStore,
    WakeUps,
)
from bulkops.storage.wakeups import NoWakeUps

__all__ = ["EngineContext", "ProcessorConfig", "Stores"]


@dataclass(frozen=True, slots=True)
class ProcessorConfig:
    """Tuning of row processing."""

    worker_id: str
    max_row_concurrency: int = 1
    flush_rows: int = 1000
    flush_interval: float = 0.5
    heartbeat_interval: float = 5.0
    signal_poll_interval: float = 2.0
    step_retry_delay: float = 1.0
    storage_retry_timeout: float = 120.0
    chunk_rows: int = 0  # the most rows one chunk of an operation holds (0: never split)
    # What counting a file's rows may cost (expanded bytes, rows): beyond, it fails.
    file_limits: FileLimits = field(default_factory=FileLimits)


@dataclass(frozen=True, slots=True)
class Stores:
    """The storage ports the engine works with."""

    operations: OperationStore
    rows: RowStore
    events: EventStore
    files: FileStore
    limits: RateLimitStore
    chunks: ChunkStore
    wakeups: WakeUps = field(default_factory=NoWakeUps)
    liveness: Liveness = field(default_factory=NoLiveness)


class EngineContext:
    """What every run of a process works with: the registry, the stores, the tuning, the
    shared row slots, the row writer, the row helpers, the signal hub, the metrics, storage
    retries and the rate gate. Runs receive it; none imports the module that starts it."""

    def __init__(
        self,
        registry: Registry,
        stores: Stores,
        config: ProcessorConfig,
        hub: SignalHub | None = None,
        metrics: Metrics | None = None,
        helpers: RowHelpers | None = None,
        share: FairShare | None = None,
    ) -> None:
        self.registry = registry
        self.share = share  # the row slots every run takes (None: each run has its own)
        self.helpers = helpers  # processes that may run the rows of chunks
        self.stores = stores
        self.config = config
        self.hub = hub or SignalHub()
        self.metrics = metrics or Metrics()
        self.retry = StorageRetry(config.storage_retry_timeout)
        self.gate = RateGate(stores.limits, self.retry)
        # Every run's finished rows, stored together; during a slow write a finished row
        # keeps its slot until it is stored, so a crash loses about the rows of the slots.
        self.writer = RowWriter(
            stores.rows,
            self.retry,
            self.metrics,
            most_unstored=share.capacity if share else 0,
            running=(lambda: share.held) if share else None,
        )
