"""Waiting for an operation to end, with its progress shown: a bar on a terminal, plain
lines otherwise."""

from __future__ import annotations

import sys
import time

import typer

from bulkops.client.models import StatusView
from bulkops.client.sync_client import Client


def follow(client: Client, operation_id: str, poll_interval: float, *, quiet: bool) -> StatusView:
    """Wait for the end, showing progress: a bar on a terminal, plain lines otherwise."""
    if quiet:
        return client.wait(operation_id, poll_interval=poll_interval)
    if sys.stderr.isatty():
        return _with_bar(client, operation_id, poll_interval)
    started, last = time.monotonic(), [""]

    def line(status: StatusView) -> None:
        text = _progress_text(status, time.monotonic() - started)
        if text != last[0]:
            typer.echo(text, err=True)
            last[0] = text

    return client.wait(operation_id, poll_interval=poll_interval, on_progress=line)


def _progress_text(status: StatusView, seconds: float) -> str:
    rate = status.processed_rows / seconds if seconds > 0 else 0.0
    return (
        f"{status.status.value}: {status.processed_rows}/{status.total_rows} rows "
        f"({status.progress}%), {status.error_count} errors, {rate:,.0f} rows/s"
    )


def _with_bar(client: Client, operation_id: str, poll_interval: float) -> StatusView:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    started = time.monotonic()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rows]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task("Pending", total=None, rows="")

        def show(status: StatusView) -> None:
            seconds = time.monotonic() - started
            rate = status.processed_rows / seconds if seconds > 0 else 0.0
            bar.update(
                task,
                description=status.status.value,
                total=status.total_rows or None,
                completed=status.processed_rows,
                rows=f"{status.processed_rows:,} rows, {status.error_count:,} errors, "
                f"{rate:,.0f} rows/s",
            )

        return client.wait(operation_id, poll_interval=poll_interval, on_progress=show)
