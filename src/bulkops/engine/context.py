"""The engine's context: what every run of a process receives (stores, tuning, retries, the
rate gate, the signal hub, metrics, row slots, helpers and the heartbeat)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bulkops.definition.registry import Registry
from bulkops.engine.config import ProcessorConfig, Stores
from bulkops.engine.heartbeat import Heartbeat
from bulkops.engine.pacing import RateGate
from bulkops.engine.persistence import StorageRetry
from bulkops.engine.signals import SignalHub
from bulkops.engine.writer import RowWriter
from bulkops.observability.metrics import Metrics

if TYPE_CHECKING:
    from bulkops.engine.fair_share import FairShare
    from bulkops.engine.helper.pool import RowHelpers

__all__ = ["EngineContext", "ProcessorConfig", "Stores"]


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
        # Beats for everything the process's runs hold, and tells them when they lost it.
        self.heartbeat = Heartbeat(
            stores.operations,
            stores.chunks,
            check_interval=config.flush_interval,
            heartbeat_interval=config.heartbeat_interval,
        )
        # Every run's finished rows, stored together; during a slow write a finished row
        # keeps its slot until it is stored, so a crash loses about the rows of the slots.
        self.writer = RowWriter(
            stores.rows,
            self.retry,
            self.metrics,
            most_unstored=share.capacity if share else 0,
            slots=share,
        )
