"""Prometheus metrics (prometheus-client), one registry per runtime.

The engine and the services record into a ``Metrics``; ``GET /metrics`` renders it. Row
latencies are counted into a light histogram of their own (a bisect and an increment per
row, no lock), turned into a Prometheus histogram when scraped, because the hot loop of a
million-row file cannot afford a locked ``Histogram.observe`` per row.

``serve``'s worker processes record in prometheus-client's multiprocess mode (files in a
directory serve made, named to them by ``PROMETHEUS_MULTIPROC_DIR``): their counters and
histograms are written as they change, and ``publish`` writes what is counted outside the
registry (row latencies, the share of row slots) every ``PUBLISH_INTERVAL``. The HTTP
process's ``render`` adds those files to its own registry (``include``), so ``/metrics``
reports the whole service.
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from bulkops.storage.states import OperationStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: from a no-op row (tens of microseconds) to a slow downstream call.
ROW_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
STEP_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0)
WRITE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
PUBLISH_INTERVAL = 1.0  # seconds between two ``publish`` of a worker process


_Metric = TypeVar("_Metric", Counter, Histogram)


class _Children(Generic[_Metric]):
    """A labelled metric's children, looked up once per label values: ``labels()`` checks
    and locks on every call, too dear for one call per request, step or signal."""

    def __init__(self, metric: _Metric) -> None:
        self._metric: _Metric = metric
        self._children: dict[tuple[str, ...], _Metric] = {}

    def __call__(self, *values: str) -> _Metric:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class _RowLatencies(Collector):
    """Cumulative row-latency buckets per operation, exported as a histogram."""

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, list[float]] = {}  # one number each, updated in place

    def observer(self, operation: str) -> Callable[[float], None]:
        """Count one row's seconds for ``operation``, its counters looked up once."""
        counts = self._counts.setdefault(operation, [0] * (len(ROW_BUCKETS) + 1))
        total = self._sums.setdefault(operation, [0.0])

        def observe(seconds: float) -> None:
            counts[bisect_left(ROW_BUCKETS, seconds)] += 1
            total[0] += seconds

        return observe

    def merge(self, operation: str, counts: Sequence[int], seconds: float) -> None:
        """Add rows counted elsewhere (by a row helper process) per bucket of ROW_BUCKETS."""
        mine = self._counts.setdefault(operation, [0] * (len(ROW_BUCKETS) + 1))
        for index, count in enumerate(counts):
            mine[index] += count
        self._sums.setdefault(operation, [0.0])[0] += seconds

    def totals(self) -> dict[str, tuple[list[int], float]]:
        """Each operation's counts per bucket and seconds so far."""
        return {op: (list(counts), self._sums[op][0]) for op, counts in self._counts.items()}

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "bulkops_row_duration_seconds",
            "Time to validate and process one row, by operation",
            labels=["operation"],
        )
        for operation, counts in list(self._counts.items()):
            buckets, total = [], 0
            for bound, count in zip((*map(str, ROW_BUCKETS), "+Inf"), counts, strict=True):
                total += count
                buckets.append((bound, float(total)))
            family.add_metric([operation], buckets, self._sums[operation][0])
        yield family


class _TenantView:
    """A registry as one tenant may read it: series labelled with another ``tenant`` are
    left out (series without that label name no tenant and stay)."""

    def __init__(self, registry: CollectorRegistry | _ServiceView, tenant: str) -> None:
        self._registry = registry
        self._tenant = tenant

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            kept = [
                s for s in family.samples if s.labels.get("tenant", self._tenant) == self._tenant
            ]
            if len(kept) != len(family.samples):
                family = copy.copy(family)
                family.samples = kept
            yield family


class TenantLoad(Protocol):
    """One tenant's part of a process's row slots (``engine.fair_share.TenantShare``)."""

    @property
    def tenant(self) -> str: ...
    @property
    def operations(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def waiting(self) -> int: ...
    @property
    def rows(self) -> int: ...


class Sharing(Protocol):
    """What a process's fair share of row slots tells when scraped."""

    def runnable(self) -> int:
        """Operations with a run in progress in this process."""

    def tenants(self) -> Sequence[TenantLoad]:
        """Each tenant's runs, slots, waiting rows and rows so far."""


class _SharingCollector(Collector):
    """Runnable operations, and rows per tenant, read from the share when scraped."""

    def __init__(self, sharing: Sharing) -> None:
        self._sharing = sharing

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        tenants = self._sharing.tenants()
        yield GaugeMetricFamily(
            "bulkops_runnable_operations",
            "Operations (or chunks of them) in progress in this process, sharing its row slots",
            value=self._sharing.runnable(),
        )
        families = (
            ("bulkops_tenant_operations", "Runs in progress in this process, by tenant", "o"),
            ("bulkops_tenant_running_rows", "Row slots held now, by tenant", "r"),
            ("bulkops_tenant_waiting_rows", "Rows waiting for a row slot now, by tenant", "w"),
        )
        for name, text, field in families:
            gauge = GaugeMetricFamily(name, text, labels=["tenant"])
            for load in tenants:
                value = {"o": load.operations, "r": load.running, "w": load.waiting}[field]
                gauge.add_metric([load.tenant], value)
            yield gauge
        rows = CounterMetricFamily(
            "bulkops_tenant_rows",
            "Rows (or batches) run in this process's row slots, by tenant",
            labels=["tenant"],
        )
        for load in tenants:
            rows.add_metric([load.tenant], load.rows)
        yield rows


class _Published:
    """What a worker process counts outside its registry, written to the multiprocess
    files by ``publish``: row latencies as a histogram, the share as live gauges and a
    counter."""

    def __init__(self, registry: CollectorRegistry, latencies: _RowLatencies) -> None:
        self._latencies = latencies
        self._sharing: Sharing | None = None
        self._rows = Histogram(
            "bulkops_row_duration_seconds",
            "Time to validate and process one row, by operation",
            ["operation"],
            buckets=ROW_BUCKETS,
            registry=registry,
        )
        self._published_rows: dict[str, tuple[list[int], float]] = {}
        self._runnable = Gauge(
            "bulkops_runnable_operations",
            "Operations (or chunks of them) in progress, sharing the row slots",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self._tenant_gauges = {
            field: Gauge(name, text, ["tenant"], registry=registry, multiprocess_mode="livesum")
            for field, name, text in (
                ("o", "bulkops_tenant_operations", "Runs in progress, by tenant"),
                ("r", "bulkops_tenant_running_rows", "Row slots held now, by tenant"),
                ("w", "bulkops_tenant_waiting_rows", "Rows waiting for a row slot now, by tenant"),
            )
        }
        self._tenant_rows = Counter(
            "bulkops_tenant_rows",
            "Rows (or batches) run in the row slots, by tenant",
            ["tenant"],
            registry=registry,
        )
        self._published_tenants: dict[str, int] = {}

    def watch(self, sharing: Sharing) -> None:
        self._sharing = sharing

    def publish(self) -> None:
        for operation, (counts, seconds) in self._latencies.totals().items():
            published, before_seconds = self._published_rows.get(
                operation, ([0] * len(counts), 0.0)
            )
            child = self._rows.labels(operation)
            # prometheus-client keeps a histogram's buckets uncumulated, one value each.
            for bucket, count, old in zip(child._buckets, counts, published, strict=True):
                if count > old:
                    bucket.inc(count - old)
            if seconds > before_seconds:
                child._sum.inc(seconds - before_seconds)
            self._published_rows[operation] = (counts, seconds)
        if self._sharing is None:
            return
        self._runnable.set(self._sharing.runnable())
        seen = set()
        for load in self._sharing.tenants():
            seen.add(load.tenant)
            values = {"o": load.operations, "r": load.running, "w": load.waiting}
            for field, gauge in self._tenant_gauges.items():
                gauge.labels(load.tenant).set(values[field])
            before = self._published_tenants.get(load.tenant, 0)
            if load.rows > before:
                self._tenant_rows.labels(load.tenant).inc(load.rows - before)
            self._published_tenants[load.tenant] = load.rows
        for tenant in self._published_tenants.keys() - seen:
            for gauge in self._tenant_gauges.values():
                gauge.labels(tenant).set(0)


class _ServiceView:
    """A registry with the multiprocess files of serve's worker processes added: the
    series both name are summed (a counter's ``_created`` is the registry's)."""

    def __init__(self, registry: CollectorRegistry, files: MultiProcessCollector) -> None:
        self._registry = registry
        self._files = files

    def collect(self) -> Iterator[Metric]:
        others = {family.name: family for family in self._files.collect()}  # type: ignore[no-untyped-call]
        for family in self._registry.collect():
            extra = others.pop(family.name, None)
            yield family if extra is None else _merged(family, extra)
        yield from others.values()


def _merged(first: Metric, second: Metric) -> Metric:
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
    for sample in (*first.samples, *second.samples):
        key = (sample.name, tuple(sorted(sample.labels.items())))
        found = samples.get(key)
        if found is None:
            samples[key] = sample
        elif not sample.name.endswith("_created"):
            samples[key] = found._replace(value=found.value + sample.value)
    family = copy.copy(first)
    family.samples = list(samples.values())
    return family


class Metrics:
    """The service's metrics. Every recording method is cheap and never raises.

    ``worker_process``: this process is one of serve's worker processes, recording in
    prometheus-client's multiprocess mode; it calls ``publish`` now and then, and reads
    no operation counts for the HTTP process.
    """

    def __init__(self, *, worker_process: bool = False) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self._files: MultiProcessCollector | None = None
        self._rows = Counter(
            "bulkops_rows_processed",
            "Rows processed, by operation and outcome (completed or failed)",
            ["operation", "outcome"],
            registry=registry,
        )
        # Read from storage when the HTTP process is scraped: a worker process has none
        # (in multiprocess mode even an unset gauge is written to its file).
        self._operations: Gauge | None = None
        self._queue: Gauge | None = None
        if not worker_process:
            self._operations = Gauge(
                "bulkops_operations",
                "Operations in storage, by status (read when scraped)",
                ["status"],
                registry=registry,
            )
            self._queue = Gauge(
                "bulkops_queue_depth",
                "Operations waiting for a worker: Pending or Retrying (read when scraped)",
                registry=registry,
            )
        self._steps = Histogram(
            "bulkops_step_duration_seconds",
            "Time of one pipeline step of one row (a wait for a signal included)",
            ["operation", "step"],
            buckets=STEP_BUCKETS,
            registry=registry,
        )
        self._writes = Histogram(
            "bulkops_storage_write_seconds",
            "Time of one batch write of row records (retries included)",
            buckets=WRITE_BUCKETS,
            registry=registry,
        )
        self._signals = Counter(
            "bulkops_signals",
            "Signals received, by outcome (success, failure, or unmatched: no row waited)",
            ["outcome"],
            registry=registry,
        )
        self._requests = Counter(
            "bulkops_http_requests",
            "HTTP requests, by method, route template and status code",
            ["method", "route", "status"],
            registry=registry,
        )
        self._latency = Histogram(
            "bulkops_http_request_duration_seconds",
            "HTTP request latency, by method and route template",
            ["method", "route"],
            registry=registry,
        )
        self._row_latencies = _RowLatencies()
        self._published: _Published | None = None
        if worker_process:
            self._published = _Published(registry, self._row_latencies)
        else:
            registry.register(self._row_latencies)
        self._rows_of = _Children(self._rows)
        self._steps_of = _Children(self._steps)
        self._signals_of = _Children(self._signals)
        self._requests_of = _Children(self._requests)
        self._latency_of = _Children(self._latency)

    def watch_sharing(self, sharing: Sharing) -> None:
        """Show the processing share's runnable operations and tenants when scraped."""
        if self._published is not None:
            self._published.watch(sharing)
        else:
            self.registry.register(_SharingCollector(sharing))

    def publish(self) -> None:
        """A worker process: write what is counted outside the registry to the
        multiprocess files (a no-op in any other process)."""
        if self._published is not None:
            self._published.publish()

    def include(self, directory: Path) -> None:
        """Report the worker processes' metrics written to ``directory`` too."""
        self._files = MultiProcessCollector(None, path=str(directory))  # type: ignore[no-untyped-call]

    @staticmethod
    def forget(directory: Path, pid: int) -> None:
        """A worker process ended: its live gauges leave ``directory`` (its counts stay)."""
        mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]

    def rows_done(self, operation: str, completed: int, failed: int) -> None:
        """Count rows recorded as Completed and Failed."""
        if completed:
            self._rows_of(operation, "completed").inc(completed)
        if failed:
            self._rows_of(operation, "failed").inc(failed)

    def row_timer(self, operation: str) -> Callable[[float], None]:
        """Record the processing times of ``operation``'s rows (a call per row)."""
        return self._row_latencies.observer(operation)

    def rows_timed(self, operation: str, counts: Sequence[int], seconds: float) -> None:
        """Rows of ``operation`` timed by a row helper process: a count per bucket of
        ``ROW_BUCKETS`` (and one above them) and their seconds in all."""
        if any(counts):  # batch operations time no row
            self._row_latencies.merge(operation, counts, seconds)

    def step_took(self, operation: str, step: str, seconds: float) -> None:
        """One step's time."""
        self._steps_of(operation, step).observe(seconds)

    def write_took(self, seconds: float) -> None:
        """One batch write's time."""
        self._writes.observe(seconds)

    def signal(self, outcome: str) -> None:
        """Count a signal: ``success``, ``failure`` or ``unmatched``."""
        self._signals_of(outcome).inc()

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count an HTTP request and its latency."""
        self._requests_of(method, route, str(status)).inc()
        self._latency_of(method, route).observe(seconds)

    def render(self, statuses: Mapping[OperationStatus, int], tenant: str | None = None) -> bytes:
        """The Prometheus text, with the operation counts read just now.

        For a reader with a ``tenant``, ``statuses`` are that tenant's counts and series
        labelled with another tenant are left out; the others (by operation type, step,
        route) are the process's and name no tenant.
        """
        if self._operations is not None and self._queue is not None:
            for status in OperationStatus:
                self._operations.labels(status.value).set(statuses.get(status, 0))
            waiting = statuses.get(OperationStatus.PENDING, 0)
            self._queue.set(waiting + statuses.get(OperationStatus.RETRYING, 0))
        source: Any = self.registry
        if self._files is not None:
            source = _ServiceView(self.registry, self._files)
        if tenant is None:
            return generate_latest(source)
        return generate_latest(_TenantView(source, tenant))
