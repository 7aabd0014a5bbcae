"""The composition root: builds stores, engine and use-cases from ``Settings``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from bulkops.channels import Channel, load_channels
from bulkops.channels.dispatcher import Dispatcher
from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry, load_registry
from bulkops.engine.fair_share import FairShare
from bulkops.engine.helper.pool import RowHelpers
from bulkops.engine.processor import Processor, ProcessorConfig, Stores
from bulkops.engine.recovery import OrphanRecovery
from bulkops.engine.scheduler import NullScheduler, Scheduler, SchedulerConfig, WorkScheduler
from bulkops.engine.signals import SignalHub
from bulkops.formats import FileLimits
from bulkops.observability.metrics import Metrics
from bulkops.service import (
    CatalogService,
    CommandService,
    FeedService,
    QueryService,
    SignalService,
    SubmissionService,
)
from bulkops.service.actions import ActionRunner, ActionService
from bulkops.service.export import ExportService
from bulkops.service.fixes import FixService
from bulkops.service.retry import RetryService
from bulkops.service.saved_mappings import MappingService
from bulkops.service.undo import UndoService
from bulkops.service.usage import UsageService
from bulkops.settings import Settings
from bulkops.sources.base import Resolver
from bulkops.sources.opener import UrlSources
from bulkops.storage.files import open_file_store
from bulkops.storage.liveness import NoLiveness
from bulkops.storage.ports import (
    ActionStore,
    ChunkStore,
    DeliveryStore,
    EventStore,
    Liveness,
    MappingStore,
    OperationStore,
    RateLimitStore,
    RetryStore,
    RowStore,
    WakeUps,
)
from bulkops.storage.wakeups import NoWakeUps

if TYPE_CHECKING:
    from bulkops.storage.sql import Database

log = logging.getLogger("bulkops")

Role = Literal["combined", "api", "worker"]
EXAMPLES_MODULE = "bulkops.examples.operations"
MEMORY_URL = "memory://"


def build_registry(
    operations: Sequence[type | OperationDefinition] | None, settings: Settings
) -> Registry:
    """Operations given in code, else those named in settings, else the built-in examples."""
    if operations:
        return Registry(operations)
    return load_registry(settings.operations or [EXAMPLES_MODULE])


def new_worker_id() -> str:
    """A worker identity that names the host and process, unique per start."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Runtime:
    """Everything one bulkops process runs on, wired together."""

    settings: Settings
    metrics: Metrics
    registry: Registry
    stores: Stores
    scheduler: Scheduler
    catalog: CatalogService
    submissions: SubmissionService
    queries: QueryService
    commands: CommandService
    feed: FeedService
    signals: SignalService
    exports: ExportService
    retries: RetryService
    fixes: FixService
    undos: UndoService
    mappings: MappingService
    usage: UsageService
    actions: ActionService
    row_helpers: RowHelpers | None = None  # processes that run the rows of chunks
    _database: Database | None = None
    _dispatcher: Dispatcher | None = None  # sends the notification outbox
    _channels: Mapping[str, Channel] = field(default_factory=dict)
    _dispatching: asyncio.Task[None] | None = None
    _action_runner: ActionRunner | None = None  # runs bulk actions (processing roles)
    _acting: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        settings: Settings,
        registry: Registry,
        *,
        role: Role,
        metrics: Metrics | None = None,
        local_wakeups: WakeUps | None = None,
        source_resolver: Resolver | None = None,
    ) -> Runtime:
        """Connect storage (applying migrations unless disabled) and build the services.

        ``metrics`` receives what the engine and the services measure (a new one when
        not given). ``local_wakeups`` carries notices between the processes of this host
        where the database carries none (``serve`` and its worker processes on SQLite).
        ``source_resolver`` resolves the host names of ``sourceUrl``s
        (default: the system's resolver; tests make names resolve anywhere).
        """
        metrics = metrics or Metrics()
        database = None
        url = settings.database_url
        operations: OperationStore
        rows: RowStore
        retry_store: RetryStore
        limits: RateLimitStore
        chunks: ChunkStore
        deliveries: DeliveryStore
        mapping_store: MappingStore
        events: EventStore
        wakeups: WakeUps = NoWakeUps()
        liveness: Liveness = NoLiveness()
        action_store: ActionStore
        if url.startswith(MEMORY_URL):
            from bulkops.storage.memory import MemoryEventStore, MemoryMappingStore, MemoryStore
            from bulkops.storage.memory_actions import MemoryActionStore

            action_store = MemoryActionStore()

            memory_events = MemoryEventStore()
            memory = MemoryStore(memory_events)
            operations, rows, retry_store, limits, chunks = memory, memory, memory, memory, memory
            deliveries = memory
            events = memory_events
            mapping_store = MemoryMappingStore()
        else:
            from bulkops.storage.sql import Database, SqlEventStore, SqlStore, migrate
            from bulkops.storage.sql.migrate import check_schema

            # Code and schema must match: a process that does not migrate refuses a database
            # of another revision (migrate() refuses one newer than the code).
            await asyncio.to_thread(migrate if settings.migrate_on_start else check_schema, url)
            database = Database.from_url(
                url,
                sqlite_busy_timeout=settings.sqlite_busy_timeout,
                # A writer per operation (or chunk) processed at once, and room for reads.
                pool_size=settings.worker_count + 4,
                timeout=settings.storage_timeout,
                processing_here=role != "api",
            )
            if settings.event_store == "memory":
                from bulkops.storage.memory import MemoryEventStore

                events = MemoryEventStore()
                sql = SqlStore(database, event_log=events)
            else:
                events = SqlEventStore(database)
                sql = SqlStore(database)
            operations, rows, retry_store, limits, chunks = sql, sql, sql, sql, sql
            deliveries = sql
            mapping_store = sql
            from bulkops.storage.sql.actions import SqlActionStore

            action_store = SqlActionStore(database)
            if database.dialect.name == "postgresql":
                from bulkops.storage.sql.liveness import PostgresLiveness
                from bulkops.storage.sql.wakeups import PostgresWakeUps

                wakeups = PostgresWakeUps(database, url)
                liveness = PostgresLiveness(database, url)
            else:
                from bulkops.storage.sql.liveness import SqliteLiveness

                liveness = SqliteLiveness(database)
        if local_wakeups is not None and isinstance(wakeups, NoWakeUps):
            wakeups = local_wakeups
        files = open_file_store(
            settings.files_url,
            s3_endpoint=settings.s3_endpoint,
            s3_region=settings.s3_region,
            timeout=settings.storage_timeout,
        )
        stores = Stores(
            operations=operations,
            rows=rows,
            events=events,
            files=files,
            limits=limits,
            chunks=chunks,
            wakeups=wakeups,
            liveness=liveness,
        )
        channels = load_channels(
            webhook_secret=settings.webhook_secret,
            webhook_allow_private=settings.webhook_allow_private,
        )
        sources = UrlSources(
            settings.source_url_allow,
            files_url=settings.files_url,
            s3_endpoint=settings.s3_endpoint,
            s3_region=settings.s3_region,
            timeout=settings.source_url_timeout,
            min_rate=settings.body_min_rate,
            resolver=source_resolver,
        )
        mappings = MappingService(registry, mapping_store)
        hub = SignalHub()
        signals = SignalService(rows, hub, stores.wakeups, metrics, operations=operations)
        helpers = cls._row_helpers(settings, registry, role)
        scheduler = cls._scheduler(settings, registry, stores, role, hub, metrics, helpers)
        commands = CommandService(operations)
        retries = RetryService(
            registry,
            operations,
            rows,
            retry_store,
            scheduler,
            max_retry_attempts=settings.max_retry_attempts,
        )
        actions = ActionService(action_store, operations)
        runner = None
        if role != "api":  # processing processes run bulk actions beside their work
            runner = ActionRunner(
                action_store,
                operations,
                commands,
                retries,
                runner_id=new_worker_id(),
                rate=settings.action_rate,
                stale_after=timedelta(seconds=settings.abandon_after),
            )
            actions.notify(runner.started)
        return cls(
            settings=settings,
            metrics=metrics,
            registry=registry,
            stores=stores,
            scheduler=scheduler,
            row_helpers=helpers,
            catalog=CatalogService(registry, escape_formulas=settings.export_escape_formulas),
            submissions=SubmissionService(
                registry,
                operations,
                files,
                scheduler,
                service_name=settings.service_name,
                max_upload_bytes=settings.max_upload_bytes,
                file_limits=file_limits(settings),
                idempotency_ttl=settings.idempotency_ttl,
                tenant_max_active=settings.tenant_max_active,
                tenant_max_rows_per_day=settings.tenant_max_rows_per_day,
                channels=frozenset(channels),
                mappings=mappings,
                sources=sources,
            ),
            queries=QueryService(operations, rows, files, deliveries),
            commands=commands,
            feed=FeedService(events, operations),
            signals=signals,
            exports=ExportService(
                operations, rows, registry, escape_formulas=settings.export_escape_formulas
            ),
            retries=retries,
            undos=UndoService(
                registry,
                operations,
                rows,
                scheduler,
                tenant_max_active=settings.tenant_max_active,
            ),
            mappings=mappings,
            usage=UsageService(operations),
            fixes=FixService(
                registry,
                operations,
                rows,
                escape_formulas=settings.export_escape_formulas,
            ),
            actions=actions,
            _action_runner=runner,
            _database=database,
            _dispatcher=None
            if role == "api"
            else Dispatcher(deliveries, channels, new_worker_id()),
            _channels=channels,
        )

    @staticmethod
    def _row_helpers(settings: Settings, registry: Registry, role: Role) -> RowHelpers | None:
        """Row helper processes, for a processing role whose operations another process
        can load (from modules or files, not classes handed over in code)."""
        count = settings.effective_row_helpers
        if role == "api" or not count or registry.sources is None:
            return None
        return RowHelpers(
            count,
            registry.sources,
            log_format=settings.log_format,
            log_level=logging.getLogger().getEffectiveLevel(),
        )

    @staticmethod
    def _scheduler(
        settings: Settings,
        registry: Registry,
        stores: Stores,
        role: Role,
        hub: SignalHub,
        metrics: Metrics,
        helpers: RowHelpers | None,
    ) -> Scheduler:
        if role == "api":
            return NullScheduler(stores.wakeups)
        share = FairShare(settings.worker_count * settings.max_row_concurrency)
        metrics.watch_sharing(share)
        processor = Processor(
            registry,
            stores,
            ProcessorConfig(
                worker_id=stores.liveness.mark(new_worker_id()),
                max_row_concurrency=settings.max_row_concurrency,
                flush_rows=settings.flush_rows,
                flush_interval=settings.flush_interval,
                heartbeat_interval=settings.effective_heartbeat_interval,
                signal_poll_interval=settings.signal_poll_interval,
                step_retry_delay=settings.step_retry_delay,
                storage_retry_timeout=settings.storage_retry_timeout,
                chunk_rows=settings.chunk_rows,
                file_limits=file_limits(settings),
            ),
            hub,
            metrics,
            helpers,
            share,
        )
        return WorkScheduler(
            processor,
            SchedulerConfig(
                worker_count=settings.worker_count,
                poll_interval=settings.poll_interval_for(role),
                stuck_timeout=settings.stuck_operation_timeout,
                shutdown_timeout=settings.shutdown_timeout,
                abandon_after=settings.abandon_after,
                scan_interval=settings.effective_heartbeat_interval,
                max_resumes=settings.max_resumes,
            ),
        )

    def processing_active(self) -> bool:
        """Whether this process is processing rows now (it wrote to SQL storage for them
        within the last second; always false on in-memory storage)."""
        return self._database is not None and self._database.processing.active()

    async def start(self) -> None:
        """Run orphaned-step recovery when enabled, then start background processing (a
        no-op for an API-only instance)."""
        if self.settings.enable_orphaned_step_recovery and not isinstance(
            self.scheduler, NullScheduler
        ):
            recovery = OrphanRecovery(
                self.stores.operations, self.stores.rows, orphan_age=self.settings.orphan_age
            )
            await recovery.run(utcnow())
        await self.scheduler.start()
        if self._dispatcher is not None:
            self._dispatching = asyncio.create_task(self._dispatcher.run())
        if self._action_runner is not None:
            self._acting = asyncio.create_task(self._action_runner.run())

    async def close(self) -> None:
        """Drain processing, then close storage."""
        if self._acting is not None:  # before processing stops: an act may queue work
            self._acting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._acting
        await self.scheduler.stop()
        if self._dispatching is not None:
            self._dispatching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatching
        for channel in self._channels.values():
            closing = getattr(channel, "aclose", None)
            if closing is not None:
                await closing()
        if self._database is not None:
            await self._database.close()


def file_limits(settings: Settings) -> FileLimits:
    """What reading one file may cost, from the settings."""
    return FileLimits(settings.effective_max_expanded_bytes, settings.max_file_rows)
