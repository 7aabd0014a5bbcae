"""The command-line client: drive a bulkops service (or gateway) over HTTP.

Every command takes ``--url`` (``BULKOPS_URL``), ``--token`` (``BULKOPS_TOKEN``) and
``--json`` (print the server's JSON). Exit codes: 0 success (with ``--wait``: Completed),
3 CompletedWithErrors, 4 Failed, 5 Cancelled, 2 a request the server refused (4xx) or a
usage error, 1 anything else (server unreachable, 5xx).
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from bulkops.client.async_client import DEFAULT_URL
from bulkops.client.errors import ApiError
from bulkops.client.models import Model, StatusView
from bulkops.client.sync_client import Client

T = TypeVar("T")

EXIT_OK, EXIT_OTHER, EXIT_REFUSED = 0, 1, 2
EXIT_BY_STATUS = {"Completed": 0, "CompletedWithErrors": 3, "Failed": 4, "Cancelled": 5}

Url = Annotated[str, typer.Option("--url", envvar="BULKOPS_URL", help="Service or gateway URL")]
Token = Annotated[
    str | None,
    typer.Option("--token", envvar="BULKOPS_TOKEN", help="Bearer token", show_default=False),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the server's JSON")]
OperationId = Annotated[str, typer.Argument(help="Operation id", show_default=False)]


def fail(message: str, code: int = EXIT_REFUSED) -> typer.Exit:
    """Print one line on stderr and give the exit to raise."""
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(code)


@contextmanager
def connected(url: str, token: str | None) -> Iterator[Client]:
    """A client; an ApiError becomes one line on stderr and the contract's exit code."""
    logging.getLogger("stamina").setLevel(logging.ERROR)  # retries are not news on a terminal
    try:
        with Client(url, token=token) as client:
            yield client
    except ApiError as exc:
        message = exc.message
        if exc.reason and exc.reason not in message:
            message += f" ({exc.reason})"
        raise fail(message, EXIT_REFUSED if exc.refused else EXIT_OTHER) from None


def emit(value: Any, as_json: bool, plain: Callable[[], None]) -> None:
    """Print ``value`` as the server's JSON, or as ``plain`` says."""
    if as_json:
        typer.echo(json.dumps(_jsonable(value), indent=2, default=str))
    else:
        plain()


def _jsonable(value: Any) -> Any:
    if isinstance(value, Model):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value


def _json_argument(text: str | None, what: str) -> Any:
    """A JSON value given inline or as ``@file``."""
    if text is None:
        return None
    raw = text
    if text.startswith("@"):
        try:
            raw = Path(text[1:]).read_text()
        except OSError as exc:
            raise fail(f"Cannot read {what} file {text[1:]!r}: {exc.strerror}") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise fail(f"{what} is not valid JSON: {exc}") from None


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
    ):
        name = "list" if command is list_operations else command.__name__
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


def operations(url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """List the operations a service offers."""
    with connected(url, token) as client:
        found = client.get_operations()

    def plain() -> None:
        for descriptor in found:
            columns = ", ".join(column.name for column in descriptor.file_columns)
            typer.echo(f"{descriptor.name}\t{descriptor.description or ''}\tcolumns: {columns}")

    emit(found, as_json, plain)


def submit(
    file: Annotated[
        Path, typer.Argument(help="CSV, JSON or JSON Lines file", exists=True, dir_okay=False)
    ],
    operation: Annotated[str, typer.Option("--operation", "-o", help="Operation name")],
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="Metadata as JSON, or @file")
    ] = None,
    column_map: Annotated[
        str | None, typer.Option("--column-map", help="File column -> field, as JSON, or @file")
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Retry-safe create key")
    ] = None,
    wait_for_end: Annotated[
        bool, typer.Option("--wait", help="Wait for the end; the exit code tells the outcome")
    ] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.05)] = 1.0,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Upload a file as a new operation; print its id."""
    meta = _json_argument(metadata, "--metadata")
    columns = _json_argument(column_map, "--column-map")
    if meta is not None and not isinstance(meta, dict):
        raise fail("--metadata must be a JSON object")
    if columns is not None and not isinstance(columns, dict):
        raise fail("--column-map must be a JSON object")
    with connected(url, token) as client:
        operation_id = client.submit(
            operation, file, meta, column_map=columns, idempotency_key=idempotency_key
        )
        if not wait_for_end:
            emit({"operationId": str(operation_id)}, as_json, lambda: typer.echo(operation_id))
            return
        if not as_json:
            typer.echo(operation_id)
        final = _follow(client, str(operation_id), poll_interval, quiet=as_json)
    emit(final, as_json, lambda: _print_status(final))
    raise typer.Exit(EXIT_BY_STATUS.get(final.status.value, EXIT_OTHER))


def _follow(client: Client, operation_id: str, poll_interval: float, *, quiet: bool) -> StatusView:
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


def _print_status(status: StatusView) -> None:
    typer.echo(
        f"{status.status.value}: {status.processed_rows}/{status.total_rows} rows, "
        f"{status.error_count} errors ({status.progress}%)"
    )


def list_operations(
    operation: Annotated[str | None, typer.Option("--operation", help="Operation name")] = None,
    status_filter: Annotated[str | None, typer.Option("--status", help="Status")] = None,
    created_by: Annotated[str | None, typer.Option("--created-by")] = None,
    page: Annotated[int | None, typer.Option("--page", min=1)] = None,
    page_size: Annotated[int | None, typer.Option("--page-size", min=1)] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List operations, newest first."""
    with connected(url, token) as client:
        found = client.get_bulks(
            operation_name=operation,
            status=status_filter,
            created_by=created_by,
            page=page,
            page_size=page_size,
        )

    def plain() -> None:
        from rich.console import Console
        from rich.table import Table

        # The tenant column only when some operation has one: a service without tenants
        # lists as before.
        tenants = any(item.tenant for item in found.items)
        columns = ["Id", "Operation", "Status", "Rows", "Errors", "Created by", "Created at"]
        table = Table(*columns, *(["Tenant"] if tenants else []))
        for item in found.items:
            table.add_row(
                str(item.id),
                item.operation_name,
                item.status.value,
                f"{item.processed_rows}/{item.total_rows}",
                str(item.error_count),
                item.created_by,
                item.created_at.isoformat(timespec="seconds"),
                *([item.tenant or ""] if tenants else []),
            )
        Console().print(table)
        typer.echo(f"Page {found.page}, {found.total_count} operations in all")

    emit(found, as_json, plain)


def status(
    operation_id: OperationId, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False
) -> None:
    """Show an operation's status and progress (and its tenant, when it has one)."""
    with connected(url, token) as client:
        found = client.get_bulk_status(operation_id)
        tenant = None if as_json else client.get_bulk(operation_id).tenant

    def plain() -> None:
        _print_status(found)
        if tenant:
            typer.echo(f"Tenant: {tenant}")

    emit(found, as_json, plain)


def wait(
    operation_id: OperationId,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.05)] = 1.0,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Wait for an operation to end; the exit code tells how it ended."""
    with connected(url, token) as client:
        final = _follow(client, operation_id, poll_interval, quiet=as_json)
    emit(final, as_json, lambda: _print_status(final))
    raise typer.Exit(EXIT_BY_STATUS.get(final.status.value, EXIT_OTHER))


def errors(
    operation_id: OperationId,
    error_type: Annotated[str | None, typer.Option("--error-type")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List an operation's failed rows (all of them)."""
    with connected(url, token) as client:
        found = list(client.iter_errors(operation_id, error_type=error_type))

    def plain() -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table("Row", "Row id", "Step", "Error type", "Message")
        for row in found:
            table.add_row(
                str(row.row_number),
                row.row_id or "",
                row.step_name or "",
                row.error_type.value if row.error_type else "",
                row.error_message or "",
            )
        Console().print(table)
        typer.echo(f"{len(found)} failed rows")

    emit(found, as_json, plain)


def rows(
    operation_id: OperationId,
    state: Annotated[str | None, typer.Option("--state")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List an operation's rows with their progress."""
    with connected(url, token) as client:
        found = list(client.iter_rows(operation_id, state=state))

    def plain() -> None:
        for row in found:
            step = row.current_step or ""
            typer.echo(
                f"{row.row_number}\t{row.state.value}\t{step}\t{row.completed_steps}/{row.total_steps}"
            )

    emit(found, as_json, plain)


def cancel(
    operation_id: OperationId, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False
) -> None:
    """Cancel an operation."""
    with connected(url, token) as client:
        found = client.cancel_bulk(operation_id)
    emit(found, as_json, lambda: _print_status(found))


def retry(
    operation_id: OperationId,
    row_numbers: Annotated[
        str | None, typer.Option("--rows", help="Only these rows, e.g. 1,2,7")
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Retry an operation's failed rows (all, or --rows)."""
    chosen = None
    if row_numbers is not None:
        try:
            chosen = [int(part) for part in row_numbers.split(",") if part.strip()]
        except ValueError:
            raise fail(
                f"--rows must be row numbers separated by commas, got {row_numbers!r}"
            ) from None
        if not chosen:
            raise fail("--rows names no row")
    with connected(url, token) as client:
        found = (
            client.retry_bulk_rows(operation_id, chosen)
            if chosen
            else client.retry_bulk(operation_id)
        )
    emit(
        found,
        as_json,
        lambda: typer.echo(f"{found.rows_submitted} rows submitted, {found.rows_skipped} skipped"),
    )


def signal(
    operation_id: OperationId,
    key: Annotated[str, typer.Argument(help="The signal key a row waits for")],
    fail_message: Annotated[
        str | None, typer.Option("--fail", help="Fail the step with this message")
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Complete (or with --fail, fail) the step a row waits at."""
    with connected(url, token) as client:
        if fail_message is not None:
            found = client.fail_step(operation_id, key, fail_message)
        else:
            found = client.signal_step(operation_id, key)
    outcome = "failed" if found.failed else "completed"
    emit(
        found,
        as_json,
        lambda: typer.echo(f"Row {found.row_number}: step {found.step_name} {outcome}"),
    )


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
            typer.echo(json.dumps(_jsonable(event), default=str))
        else:
            typer.echo(
                f"{event.sequence}\t{event.timestamp.isoformat(timespec='seconds')}\t"
                f"{event.type}\t{event.operation_id}\t{event.message}"
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
        typer.echo(json.dumps(_jsonable(found), indent=2, default=str))
    else:
        for event in found:
            show(event)


def export(
    operation_id: OperationId,
    mode: Annotated[str, typer.Option("--mode", help="report or data")] = "report",
    file_format: Annotated[str, typer.Option("--format", help="csv, json or jsonl")] = "csv",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File (default: standard output)")
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Export an operation's rows."""
    with connected(url, token) as client, _sink(output) as out:
        written = client.export_bulk(operation_id, out, mode=mode, format=file_format)
    if output is not None:
        typer.echo(f"Wrote {written} bytes to {output}", err=True)


def download(
    operation_id: OperationId,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File (default: the original name)")
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Download the original file of an operation."""
    with connected(url, token) as client:
        target = output or Path(client.get_bulk(operation_id).file_name or f"{operation_id}.dat")
        with _sink(target) as out:
            written = client.get_bulk_file(operation_id, out)
    typer.echo(f"Wrote {written} bytes to {target}", err=True)


def template(
    name: Annotated[str, typer.Argument(help="Operation name")],
    output: Annotated[Path | None, typer.Option("--output", "-o")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Print (or save) the CSV header template of an operation."""
    with connected(url, token) as client:
        text = client.get_operation_template(name)
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
    else:
        output.write_text(text)
        typer.echo(f"Wrote {output}", err=True)


@contextmanager
def _sink(path: Path | None) -> Iterator[Any]:
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("wb") as out:
            yield out
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
