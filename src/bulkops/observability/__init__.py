"""What the service tells operators about itself: Prometheus metrics."""

from bulkops.observability.metrics import Metrics

__all__ = ["Metrics"]
