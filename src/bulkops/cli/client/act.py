"""``bulkops act``: retry, cancel or restart every operation a filter matches (a bulk
action), preview it, and follow it to its end."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any

import typer

from bulkops.cli.client.common import (
    EXIT_OK,
    AsJson,
    Token,
    Url,
    connected,
    emit,
    fail,
)
from bulkops.client.action_models import Action, ActionDetail
from bulkops.client.http import DEFAULT_URL
from bulkops.client.sync_client import Client

__all__ = ["act"]

EXIT_FAILED_ITEMS, EXIT_CANCELLED = 3, 5


class ActionName(StrEnum):
    """The actions ``bulkops act`` can take."""

    RETRY = "retry"
    CANCEL = "cancel"
    RESTART = "restart"


def act(
    action: Annotated[ActionName, typer.Argument(help="retry, cancel or restart")],
    operation: Annotated[
        str | None, typer.Option("--operation", help="Only operations of this name")
    ] = None,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", help="Only operations in this status (repeatable)"),
    ] = None,
    created_by: Annotated[
        str | None, typer.Option("--created-by", help="Only operations this user created")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only operations created at or after (ISO 8601)")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Only operations created at or before (ISO 8601)")
    ] = None,
    ids: Annotated[
        list[str] | None, typer.Option("--id", help="Only these operations (repeatable)")
    ] = None,
    from_step: Annotated[
        str | None,
        typer.Option("--from-step", help="restart: run the rows again from this pipeline step"),
    ] = None,
    include_completed: Annotated[
        bool,
        typer.Option("--include-completed", help="restart: Completed rows and operations too"),
    ] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why, kept with the action")
    ] = None,
    preview: Annotated[
        bool, typer.Option("--preview", help="Only say how many operations match; act on none")
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the action to its end (exit 3: some failed)")
    ] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.05)] = 1.0,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Retry, cancel or restart every operation the filter matches (at least one of
    --operation, --status, --created-by, --since, --until, --id)."""
    wanted: dict[str, Any] = {}
    if ids:
        wanted["ids"] = list(ids)
    if operation:
        wanted["operationName"] = operation
    if status:  # repeated, or separated by commas
        wanted["status"] = [s.strip() for given in status for s in given.split(",") if s.strip()]
    if created_by:
        wanted["createdBy"] = created_by
    if since:
        wanted["from"] = since
    if until:
        wanted["to"] = until
    if not wanted:
        raise fail(
            "name at least one of --operation, --status, --created-by, --since, --until, --id"
        )
    options: dict[str, Any] = {"from_step": from_step, "include_completed": include_completed}
    with connected(url, token) as client:
        if preview:
            found = client.preview_action(action.value, wanted, **options)
            emit(found, as_json, lambda: _print_preview(found.matched, found.operation_ids))
            return
        started = client.create_action(action.value, wanted, reason=reason, **options)
        if not wait:
            emit(started, as_json, lambda: _print_started(started))
            return
        if not as_json:
            _print_started(started)
        final = _follow(client, started, poll_interval, quiet=as_json)
    emit(final, as_json, lambda: _print_final(final))
    if final.status == "Cancelled":
        raise typer.Exit(EXIT_CANCELLED)
    raise typer.Exit(EXIT_FAILED_ITEMS if final.failed else EXIT_OK)


def _print_preview(matched: int, ids: list[Any]) -> None:
    noun = "operation matches" if matched == 1 else "operations match"
    typer.echo(f"{matched} {noun}" + (f" (first {len(ids)}):" if ids else ""))
    for operation_id in ids:
        typer.echo(f"  {operation_id}")


def _print_started(action: Action) -> None:
    typer.echo(f"Action {action.id} ({action.action}) started on {action.matched} operations")


def _progress(action: Action) -> str:
    return (
        f"{action.status}: {action.done} done, {action.skipped} skipped, {action.failed} "
        f"failed of {action.matched}"
    )


def _follow(client: Client, action: Action, interval: float, *, quiet: bool) -> ActionDetail:
    last = ""
    while True:
        found = client.get_action(action.id)
        line = _progress(found)
        if not quiet and line != last:
            typer.echo(line, err=True)
            last = line
        if found.finished:
            return found
        time.sleep(interval)


def _print_final(action: ActionDetail) -> None:
    typer.echo(_progress(action))
    for item in action.items:
        typer.echo(f"  {item.outcome} {item.operation_id}: {item.reason or ''}")
