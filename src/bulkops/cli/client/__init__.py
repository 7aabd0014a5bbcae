"""The command-line client: drive a bulkops service (or gateway) over HTTP.

Every command takes ``--url`` (``BULKOPS_URL``), ``--token`` (``BULKOPS_TOKEN``) and
``--json`` (print the server's JSON). Exit codes: 0 success (with ``--wait``: Completed),
3 CompletedWithErrors, 4 Failed, 5 Cancelled, 2 a request the server refused (4xx) or a
usage error, 1 anything else (server unreachable, 5xx). Piped, ``list``, ``errors``,
``rows`` and ``operations`` print tab-separated lines (``bulkops.cli.client.listing``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer

from bulkops.cli.client.act import act
from bulkops.cli.client.commands import (
    cancel,
    download,
    errors,
    export,
    list_operations,
    operations,
    retry,
    rows,
    signal,
    status,
    submit,
    template,
    wait,
)
from bulkops.cli.client.events import events
from bulkops.cli.client.fix import fix
from bulkops.cli.client.mappings import mapping_delete, mapping_save, mappings
from bulkops.cli.client.undo import undo
from bulkops.cli.client.usage import usage

__all__ = ["PruneEvents", "register"]

PruneEvents = Callable[[float | None], None]


def register(app: typer.Typer, *, prune_events: PruneEvents | None = None) -> None:
    """Add the client commands to the ``bulkops`` command.

    ``prune_events(older_than_days)`` serves ``bulkops events prune --older-than DAYS``:
    it works on the configured database, not over HTTP, so the caller supplies it and this
    module stays a client of the HTTP API alone.
    """
    for command in (
        operations,
        submit,
        list_operations,
        status,
        wait,
        errors,
        rows,
        cancel,
        retry,
        signal,
        _events_or_prune(prune_events),
        export,
        download,
        template,
        fix,
        undo,
        mappings,
        mapping_save,
        mapping_delete,
        usage,
        act,
    ):
        name = "list" if command is list_operations else command.__name__.replace("_", "-")
        app.command(name)(command)


def _events_or_prune(prune: PruneEvents | None) -> Callable[..., None]:
    """The ``events`` command, which hands ``events prune`` to ``prune``."""

    @functools.wraps(events)
    def command(**arguments: Any) -> None:
        if prune is not None and arguments.get("operation_id") == "prune":
            prune(arguments.get("older_than"))
            return
        events(**arguments)

    return command
