"""OpenTelemetry spans per operation (or chunk) and per pipeline step, when the
``opentelemetry`` API is installed (``pip install 'bulkops[otel]'``); nothing otherwise.

Spans go to whatever tracer provider the application configures (an OTLP exporter, for
example); without one the API's default provider drops them at no cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - depends on the installation
    _trace = None  # type: ignore[assignment]

TRACER = "bulkops"


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    """A span around the block (attributes with ``None`` values left out)."""
    if _trace is None:
        yield
        return
    tracer = _trace.get_tracer(TRACER)
    kept = {key: value for key, value in attributes.items() if value is not None}
    with tracer.start_as_current_span(name, attributes=kept):
        yield
