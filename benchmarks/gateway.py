"""Scenario 9: the gateway's overhead. ``GET /status`` through a gateway against the same
request sent to the backend directly, and the time to serve page 10 of a list merged from
three backends.

Three ``bulkops serve`` processes (API role: nothing is processed, so nothing changes while
measuring), each serving one operation of its own, and a ``bulkops gateway`` process in front
of them, all on loopback ports.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from benchmarks.context import Context, data_dir
from benchmarks.results import Result, at_most
from benchmarks.service import Service, ServiceError

BACKENDS = ("a", "b", "c")
MS = 1000.0


class _Backend(Service):
    """``bulkops serve --role api`` serving the benchmark's operation of one backend."""

    def __init__(self, directory: Path, name: str) -> None:
        super().__init__(directory)
        modules = directory / f"gateway_{name}.py"
        modules.write_text(f"from benchmarks.gateway_operations import Gateway{name.upper()}\n")
        self._env["BULKOPS_OPERATIONS"] = str(modules)
        self._env["BULKOPS_ROLE"] = "api"


class _Gateway(Service):
    """``bulkops gateway`` over the backends."""

    def __init__(self, directory: Path, backends: dict[str, str]) -> None:
        super().__init__(directory, command=[sys.executable, "-m", "bulkops", "gateway"])
        self._env["BULKOPS_GATEWAY_BACKENDS"] = ",".join(f"{n}={u}" for n, u in backends.items())


class _Timer:
    """Latencies of successful requests, and a count of the others."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0

    def time(self, call: Callable[[], httpx.Response]) -> None:
        started = time.perf_counter()
        try:
            response = call()
        except httpx.HTTPError:
            self.errors += 1
            return
        if response.status_code == 200:
            self.latencies.append(time.perf_counter() - started)
        else:
            self.errors += 1

    def ms(self, percent: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1] * MS


@contextmanager
def _services() -> Iterator[tuple[dict[str, Service], Service]]:
    with ExitStack() as stack:
        # One after the other: each start is given 60 s, which parallel starts on a busy
        # 2-core machine can exceed.
        backends: dict[str, Service] = {
            name: stack.enter_context(_Backend(stack.enter_context(data_dir()), name))
            for name in BACKENDS
        }
        urls = {name: service.url for name, service in backends.items()}
        gateway = stack.enter_context(_Gateway(stack.enter_context(data_dir()), urls))
        yield backends, gateway


def _create(client: httpx.Client, url: str, operation: str) -> str:
    response = client.post(
        f"{url}/api/bulks",
        data={"operationName": operation, "metadata": "{}"},
        files={"file": ("rows.csv", b"name\nx\n", "text/csv")},
    )
    if response.status_code != 201:
        raise ServiceError(f"create answered {response.status_code}: {response.text}")
    return str(response.json()["operationId"])


def _newest_first(items: list[dict[str, Any]]) -> list[str]:
    by_id = sorted(items, key=lambda i: i["id"])
    ordered = sorted(by_id, key=lambda i: datetime.fromisoformat(i["createdAt"]), reverse=True)
    return [i["id"] for i in ordered]


def gateway_overhead(context: Context) -> Result:
    """Scenario 9: p50/p99 of GET /status through the gateway and directly (requests
    alternate, one keep-alive connection each), and page 10 of a merged list of three."""
    quick = context.sizes.name == "quick"
    polls = 200 if quick else 3000
    per_backend, page_size = (34, 10) if quick else (100, 25)
    list_requests = 20 if quick else 200
    direct, through, merged, single = _Timer(), _Timer(), _Timer(), _Timer()
    with _services() as (backends, gateway), httpx.Client(timeout=60) as client:
        for _ in range(per_backend):  # interleaved, so the merge really interleaves
            for name in backends:
                _create(client, gateway.url, f"gateway-{name}")
        operation_id = _create(client, gateway.url, "gateway-a")
        direct_url = f"{backends['a'].url}/api/bulks/{operation_id}/status"
        through_url = f"{gateway.url}/api/bulks/{operation_id}/status"
        with httpx.Client(timeout=60) as to_backend, httpx.Client(timeout=60) as to_gateway:
            for _ in range(50):  # warm-up: connections, caches
                to_backend.get(direct_url)
                to_gateway.get(through_url)
            for _ in range(polls):
                direct.time(lambda: to_backend.get(direct_url))
                through.time(lambda: to_gateway.get(through_url))

            params = {"page": 10, "pageSize": page_size}
            union: list[dict[str, Any]] = []
            for service in backends.values():
                union += client.get(f"{service.url}/api/bulks?pageSize=1000").json()["items"]
            expected = _newest_first(union)[9 * page_size : 10 * page_size]
            page = to_gateway.get(f"{gateway.url}/api/bulks", params=params).json()
            if [i["id"] for i in page["items"]] != expected:
                raise ServiceError("page 10 through the gateway is not page 10 of the union")
            list_url, one_url = f"{gateway.url}/api/bulks", f"{backends['a'].url}/api/bulks"
            for _ in range(list_requests):
                merged.time(lambda: to_gateway.get(list_url, params=params))
                single.time(lambda: to_backend.get(one_url, params=params))
    errors = direct.errors + through.errors + merged.errors + single.errors
    result = Result(
        figures={
            "status_requests": polls,
            "direct_p50_ms": round(direct.ms(50), 2),
            "direct_p99_ms": round(direct.ms(99), 2),
            "gateway_p50_ms": round(through.ms(50), 2),
            "gateway_p99_ms": round(through.ms(99), 2),
            "overhead_p50_ms": round(through.ms(50) - direct.ms(50), 2),
            "overhead_p99_ms": round(through.ms(99) - direct.ms(99), 2),
            "operations_per_backend": per_backend,
            "page_size": page_size,
            "merged_page10_p50_ms": round(merged.ms(50), 2),
            "merged_page10_p99_ms": round(merged.ms(99), 2),
            "single_backend_page10_p50_ms": round(single.ms(50), 2),
            "failed_requests": errors,
        },
        notes=[
            "No latency target: the figures report the gateway's overhead.",
            "Status: the same operation's status, direct and through the gateway, requests "
            "alternating on one keep-alive connection each (id cache warm).",
            f"Merged list: page 10 of {page_size} over {len(BACKENDS)} backends of "
            f"{per_backend} operations each (each backend reads a prefix of "
            f"{10 * page_size} rows), checked equal to page 10 of the union; against page 10 "
            "of one backend read directly.",
        ],
    )
    result.checks.append(at_most("failed requests", errors, 0))
    return result
