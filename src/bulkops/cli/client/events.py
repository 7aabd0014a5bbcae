"""``bulkops events``: the event feed, followed or not (``events prune`` is handed to the
database-side command, ``bulkops.cli.maintenance``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from bulkops.cli.client.common import AsJson, Token, Url, connected, fail, jsonable
from bulkops.cli.client.listing import field
from bulkops.client.http import DEFAULT_URL


def events(
    operation_id: Annotated[
        str | None, typer.Argument(help="Operation id (all operations when left out)")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events")
    ] = False,
    since: Annotated[int | None, typer.Option("--since", help="After this sequence")] = None,
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", help="With `events prune`: days", show_default=False),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Print the event feed (of one operation); `events prune --older-than DAYS` deletes
    old events from the configured database."""
    if older_than is not None:
        raise fail("--older-than goes with `bulkops events prune`")

    def show(event: Any) -> None:
        if as_json:
            typer.echo(json.dumps(jsonable(event), default=str))
        else:
            # One line per event, whatever its message holds.
            typer.echo(
                f"{event.sequence}\t{event.timestamp.isoformat(timespec='seconds')}\t"
                f"{event.type}\t{event.operation_id}\t{field(event.message)}"
            )

    with connected(url, token) as client:
        if follow:
            try:
                for event in client.follow_events(since, operation_id=operation_id):
                    show(event)
            except KeyboardInterrupt:
                return
            return
        if operation_id is not None:
            found = client.get_bulk_events(operation_id, since=since)
        else:
            found = client.get_events(since=since)
    if as_json:
        typer.echo(json.dumps(jsonable(found), indent=2, default=str))
    else:
        for event in found:
            show(event)
