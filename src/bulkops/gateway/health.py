"""The ``bulk-backends`` readiness check: how many backends answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bulkops.gateway.backend import Backend, BackendFailure
from bulkops.gateway.fanout import fan_out

CHECK_NAME = "bulk-backends"
READY_PATH = "/health/ready"
HEALTHY, DEGRADED, UNHEALTHY = "Healthy", "Degraded", "Unhealthy"


async def _probe(backend: Backend) -> None:
    status, _ = await backend.get_json(READY_PATH)
    if status != 200:
        raise BackendFailure(backend.name, f"is not ready (answered {status})")


async def check_backends(backends: Sequence[Backend], timeout: float) -> tuple[int, dict[str, Any]]:
    """Ask every backend whether it is ready.

    Returns:
        The HTTP status (200 Healthy or Degraded, 503 Unhealthy) and the readiness body:
        Healthy when every backend is ready, Degraded when some are, Unhealthy when none is
        or none is configured.
    """
    answers = await fan_out(backends, _probe, timeout)
    report: dict[str, Any] = {}
    for answer in answers:
        entry: dict[str, Any] = {
            "status": HEALTHY if answer.ok else UNHEALTHY,
            "url": answer.backend.url,
            "circuit": str(answer.backend.breaker.state),
        }
        if answer.failure is not None:
            entry["error"] = answer.failure
        report[answer.backend.name] = entry
    ready = sum(1 for a in answers if a.ok)
    if backends and ready == len(backends):
        status = HEALTHY
    elif ready:
        status = DEGRADED
    else:
        status = UNHEALTHY
    check: dict[str, Any] = {"status": status, "tags": ["ready"], "backends": report}
    if not backends:
        check["error"] = "No backends are configured"
    body = {"status": status, "checks": {CHECK_NAME: check}}
    return (503 if status == UNHEALTHY else 200), body
