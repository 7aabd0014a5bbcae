"""The engine's plain settings: the tuning of row processing and the storage ports it uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from bulkops.formats import FileLimits
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
