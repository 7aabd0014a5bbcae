"""The gateway's Prometheus metrics: its HTTP requests, and each backend's circuit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bulkops.gateway.backend import Backend
from bulkops.gateway.breaker import BreakerState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus text format


class _Circuits(Collector):
    """Each backend's circuit state, read when scraped (1 for its current state)."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self._backends = list(backends)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "bulkops_gateway_backend_circuit",
            "Each backend's circuit breaker: 1 for the state it is in (closed, open, half-open)",
            labels=["backend", "state"],
        )
        for backend in self._backends:
            for state in BreakerState:
                family.add_metric(
                    [backend.name, state.value], 1.0 if backend.breaker.state is state else 0.0
                )
        yield family


class GatewayMetrics:
    """What ``GET /metrics`` of the gateway shows; recording never raises.

    Args:
        backends: Every configured backend (their circuits are read when scraped).
    """

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "bulkops_gateway_http_requests",
            "HTTP requests to the gateway, by method, route template and status code",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "bulkops_gateway_http_request_duration_seconds",
            "HTTP request latency at the gateway (backend calls included), by method and route",
            ["method", "route"],
            registry=self.registry,
        )
        self.registry.register(_Circuits(backends))

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request and its latency."""
        self._requests.labels(method, route, str(status)).inc()
        self._latency.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text."""
        return generate_latest(self.registry)
