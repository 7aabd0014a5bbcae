"""What each of ``serve``'s worker processes runs: ``python -m bulkops.supervisor.child``.

It reads its ``Assignment`` from stdin (``lifeline``), then processes operations like
``bulkops worker`` until ``serve`` sends SIGTERM (or SIGINT): it drains within
``BULKOPS_SHUTDOWN_TIMEOUT`` and exits. Its log lines go to the stderr it shares with
``serve``, tagged with its name; its metrics go to the multiprocess files ``serve`` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from bulkops.observability.logs import configure
from bulkops.observability.metrics import PUBLISH_INTERVAL, Metrics
from bulkops.runtime import Runtime, build_registry
from bulkops.storage.wakeups import SocketWakeUps
from bulkops.supervisor.interpreter import loop_factory, settle_interpreter
from bulkops.supervisor.lifeline import Assignment, receive, report_ready

log = logging.getLogger("bulkops")


async def _publish(metrics: Metrics) -> None:
    while True:
        await asyncio.sleep(PUBLISH_INTERVAL)
        metrics.publish()


async def run(assignment: Assignment) -> None:
    """Process operations until SIGTERM or SIGINT, then drain and close."""
    settings = assignment.settings
    registry = build_registry(None, settings)
    metrics = Metrics(worker_process=True)
    runtime = await Runtime.open(
        settings,
        registry,
        role="worker",
        metrics=metrics,
        local_wakeups=SocketWakeUps(assignment.wakeups),
    )
    settle_interpreter(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    publishing = asyncio.create_task(_publish(metrics))
    try:
        await runtime.start()
        report_ready(assignment)
        log.info("Worker process %s started", assignment.name)
        await stop.wait()
        log.info("Worker process %s stopping", assignment.name)
    finally:
        await runtime.close()
        publishing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await publishing
        metrics.publish()


def main() -> None:
    """Entry point of a worker process."""
    assignment = receive()
    configure(assignment.settings.log_format, tag=assignment.name)
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(run(assignment))


if __name__ == "__main__":
    main()
