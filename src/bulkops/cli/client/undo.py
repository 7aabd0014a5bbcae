"""``bulkops undo``: undo what a finished operation did, or preview it."""

from __future__ import annotations

from typing import Annotated

import typer

from bulkops.cli.client.common import (
    EXIT_BY_STATUS,
    EXIT_OTHER,
    AsJson,
    OperationId,
    Token,
    Url,
    connected,
    emit,
    print_status,
)
from bulkops.cli.client.progress import follow
from bulkops.client.http import DEFAULT_URL


def undo(
    operation_id: OperationId,
    preview: Annotated[
        bool, typer.Option("--preview", help="Only count the rows and steps it would undo")
    ] = False,
    wait_for_end: Annotated[
        bool, typer.Option("--wait", help="Wait for the undo to end; the exit code tells how")
    ] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.05)] = 1.0,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Undo a finished operation: start an operation that undoes each row's completed steps
    (last step first) and print its id; --preview counts them only. Exit codes with --wait
    as for submit --wait."""
    with connected(url, token) as client:
        if preview:
            counted = client.undo_bulk(operation_id, preview=True)
            emit(
                counted,
                as_json,
                lambda: typer.echo(f"{counted.rows} rows, {counted.steps} steps to undo"),
            )
            return
        created = client.undo_bulk(operation_id)
        if not wait_for_end:
            emit(created, as_json, lambda: typer.echo(created.id))
            return
        if not as_json:
            typer.echo(created.id)
        final = follow(client, str(created.id), poll_interval, quiet=as_json)
    emit(final, as_json, lambda: print_status(final))
    raise typer.Exit(EXIT_BY_STATUS.get(final.status.value, EXIT_OTHER))
