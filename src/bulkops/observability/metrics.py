"""Prometheus metrics (prometheus-client), one registry per runtime.

The engine and the services record into a ``Metrics``; ``GET /metrics`` renders it. Row
latencies are counted into a light histogram of their own (a bisect and an increment per
row, no lock), turned into a Prometheus histogram when scraped, because the hot loop of a
million-row file cannot afford a locked ``Histogram.observe`` per row.
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from bulkops.storage.states import OperationStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: from a no-op row (tens of microseconds) to a slow downstream call.
ROW_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
STEP_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0)
WRITE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)


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

    def __init__(self, registry: CollectorRegistry, tenant: str) -> None:
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


class Metrics:
    """The service's metrics. Every recording method is cheap and never raises."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self._rows = Counter(
            "bulkops_rows_processed",
            "Rows processed, by operation and outcome (completed or failed)",
            ["operation", "outcome"],
            registry=registry,
        )
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
        registry.register(self._row_latencies)
        self._rows_of = _Children(self._rows)
        self._steps_of = _Children(self._steps)
        self._signals_of = _Children(self._signals)
        self._requests_of = _Children(self._requests)
        self._latency_of = _Children(self._latency)

    def watch_sharing(self, sharing: Sharing) -> None:
        """Show the processing share's runnable operations and tenants when scraped."""
        self.registry.register(_SharingCollector(sharing))

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
        for status in OperationStatus:
            self._operations.labels(status.value).set(statuses.get(status, 0))
        waiting = statuses.get(OperationStatus.PENDING, 0)
        self._queue.set(waiting + statuses.get(OperationStatus.RETRYING, 0))
        if tenant is None:
            return generate_latest(self.registry)
        return generate_latest(_TenantView(self.registry, tenant))
