"""The client commands other than ``events`` and ``fix``: one function per command."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import click
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
    fail,
    json_argument,
    print_status,
)
from bulkops.cli.client.listing import Column, show
from bulkops.cli.client.progress import follow
from bulkops.client.http import DEFAULT_URL
from bulkops.client.models import (
    Operation,
    OperationDescriptor,
    RowError,
    RowProgress,
)

OPERATION_COLUMNS: list[Column[OperationDescriptor]] = [
    Column("name", "Operation", lambda d: d.name),
    Column("description", "Description", lambda d: d.description),
    Column("fileColumns", "Columns", lambda d: ",".join(c.name for c in d.file_columns)),
    Column("steps", "Steps", lambda d: ",".join(d.steps)),
]


def operations(url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """List the operations a service offers."""
    with connected(url, token) as client:
        found = client.get_operations()
    emit(found, as_json, lambda: show(found, OPERATION_COLUMNS))


def submit(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="CSV, JSON, JSON Lines or XLSX file (.gz too); none with --from or --source-url",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    operation: Annotated[
        str | None,
        typer.Option(
            "--operation", "-o", help="Operation name (with --from: the source's by default)"
        ),
    ] = None,
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="Metadata as JSON, or @file")
    ] = None,
    column_map: Annotated[
        str | None, typer.Option("--column-map", help="File column -> field, as JSON, or @file")
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Retry-safe create key")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate every row, process none")
    ] = False,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Run from an earlier operation's file, its fixed rows applied (no FILE)",
            show_default=False,
        ),
    ] = None,
    priority: Annotated[
        int | None, typer.Option("--priority", min=-10, max=10, help="-10 to 10 (default 0)")
    ] = None,
    sheet: Annotated[str | None, typer.Option("--sheet", help="Worksheet of an XLSX file")] = None,
    source_url: Annotated[
        str | None,
        typer.Option(
            "--source-url",
            help="Instead of FILE: the service reads the file from s3://bucket/key or an "
            "allow-listed http(s) URL (--url stays the service's address)",
            show_default=False,
        ),
    ] = None,
    mapping: Annotated[
        str | None,
        typer.Option("--mapping", help="A saved column mapping's name (see: mappings)"),
    ] = None,
    reject_duplicate: Annotated[
        bool,
        typer.Option(
            "--reject-duplicate",
            help="Refuse a file the operation already had (the same SHA-256)",
        ),
    ] = False,
    wait_for_end: Annotated[
        bool, typer.Option("--wait", help="Wait for the end; the exit code tells the outcome")
    ] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.05)] = 1.0,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Upload a file as a new operation (or have the service read it: --source-url; or run
    from an earlier one: --from); print its id."""
    if source_url is not None and (file is not None or source is not None):
        raise fail("--source-url replaces FILE and --from: give one of them")
    if source_url is None and (file is None) == (source is None):
        raise fail("submit needs a FILE, or --from ID to run from an earlier operation (not both)")
    if (file is not None or source_url is not None) and operation is None:
        raise fail("submit FILE (or --source-url) needs --operation NAME")
    meta = json_argument(metadata, "--metadata")
    columns = json_argument(column_map, "--column-map")
    if meta is not None and not isinstance(meta, dict):
        raise fail("--metadata must be a JSON object")
    if columns is not None and not isinstance(columns, dict):
        raise fail("--column-map must be a JSON object")
    with connected(url, token) as client:
        operation_id = client.submit(
            operation,
            file,
            meta,
            column_map=columns,
            idempotency_key=idempotency_key,
            dry_run=dry_run,
            source_operation_id=source,
            priority=priority,
            sheet=sheet,
            source_url=source_url,
            mapping=mapping,
            reject_duplicate=reject_duplicate,
        )
        if not wait_for_end:
            emit({"operationId": str(operation_id)}, as_json, lambda: typer.echo(operation_id))
            return
        if not as_json:
            typer.echo(operation_id)
        final = follow(client, str(operation_id), poll_interval, quiet=as_json)
    emit(final, as_json, lambda: print_status(final))
    raise typer.Exit(EXIT_BY_STATUS.get(final.status.value, EXIT_OTHER))


LIST_COLUMNS: list[Column[Operation]] = [
    Column("id", "Id", lambda o: o.id),
    Column("operationName", "Operation", lambda o: o.operation_name),
    Column("status", "Status", lambda o: o.status, in_table=False),
    Column(
        "status", "Status", lambda o: f"{o.status.value}{' (dry run)' * o.dry_run}", in_tsv=False
    ),
    Column("processedRows", "Processed", lambda o: o.processed_rows, in_table=False),
    Column("totalRows", "Rows", lambda o: o.total_rows, in_table=False),
    Column("rows", "Rows", lambda o: f"{o.processed_rows}/{o.total_rows}", in_tsv=False),
    Column("errorCount", "Errors", lambda o: o.error_count),
    Column("priority", "Priority", lambda o: o.priority, in_table=False),
    Column("dryRun", "Dry run", lambda o: o.dry_run, in_table=False),
    Column("createdBy", "Created by", lambda o: o.created_by),
    Column("createdAt", "Created at", lambda o: o.created_at),
    Column("tenant", "Tenant", lambda o: o.tenant, in_table=False),
]


def list_operations(
    operation: Annotated[str | None, typer.Option("--operation", help="Operation name")] = None,
    status_filter: Annotated[str | None, typer.Option("--status", help="Status")] = None,
    created_by: Annotated[
        str | None, typer.Option("--created-by", help="Only operations this caller created")
    ] = None,
    page: Annotated[
        int | None, typer.Option("--page", min=1, help="Page number, from 1 (default 1)")
    ] = None,
    page_size: Annotated[
        int | None,
        typer.Option("--page-size", min=1, help="Operations per page (default 25, at most 1000)"),
    ] = None,
    file_sha256: Annotated[
        str | None,
        typer.Option("--file-sha256", help="Only operations whose file has this SHA-256"),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List operations, newest first (piped: tab-separated lines, a header first)."""
    with connected(url, token) as client:
        found = client.get_bulks(
            operation_name=operation,
            status=status_filter,
            created_by=created_by,
            page=page,
            page_size=page_size,
            file_sha256=file_sha256,
        )
    summary = f"Page {found.page}, {found.total_count} operations in all"
    columns = LIST_COLUMNS
    if any(item.tenant for item in found.items):  # a service without tenants lists as before
        columns = [replace(c, in_table=True) if c.name == "tenant" else c for c in columns]
    emit(found, as_json, lambda: show(found.items, columns, summary))


def status(
    operation_id: OperationId, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False
) -> None:
    """Show an operation's status and progress (and its tenant, when it has one)."""
    with connected(url, token) as client:
        found = client.get_bulk_status(operation_id)
        tenant = None if as_json else client.get_bulk(operation_id).tenant

    def plain() -> None:
        print_status(found)
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
        final = follow(client, operation_id, poll_interval, quiet=as_json)
    emit(final, as_json, lambda: print_status(final))
    raise typer.Exit(EXIT_BY_STATUS.get(final.status.value, EXIT_OTHER))


ERROR_COLUMNS: list[Column[RowError]] = [
    Column("rowNumber", "Row", lambda r: r.row_number),
    Column("rowId", "Row id", lambda r: r.row_id),
    Column("state", "State", lambda r: r.state, in_table=False),
    Column("stepName", "Step", lambda r: r.step_name),
    Column("errorType", "Error type", lambda r: r.error_type),
    Column("errorMessage", "Message", lambda r: r.error_message),
    Column("fixed", "Fixed", lambda r: r.fixed),
]

ROW_COLUMNS: list[Column[RowProgress]] = [
    Column("rowNumber", "Row", lambda r: r.row_number),
    Column("rowId", "Row id", lambda r: r.row_id),
    Column("state", "State", lambda r: r.state),
    Column("currentStep", "Step", lambda r: r.current_step),
    Column("completedSteps", "Done", lambda r: r.completed_steps),
    Column("totalSteps", "Steps", lambda r: r.total_steps),
    Column("retryAttempt", "Retries", lambda r: r.retry_attempt),
    Column("fixed", "Fixed", lambda r: r.fixed),
]


def errors(
    operation_id: OperationId,
    error_type: Annotated[
        str | None,
        typer.Option(
            "--error-type",
            help="Only this error type: Validation, Processing, StepFailure, Timeout or "
            "SignalFailure (any case; unknown ignored)",
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List an operation's failed rows (all of them; piped: tab-separated lines)."""
    with connected(url, token) as client:
        found = list(client.iter_errors(operation_id, error_type=error_type))
    emit(found, as_json, lambda: show(found, ERROR_COLUMNS, f"{len(found)} failed rows"))


def rows(
    operation_id: OperationId,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="Only rows in this state: Pending, Running, WaitingForCompletion, Completed "
            "or Failed",
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List an operation's rows with their progress (piped: tab-separated lines)."""
    with connected(url, token) as client:
        found = list(client.iter_rows(operation_id, state=state))
    emit(found, as_json, lambda: show(found, ROW_COLUMNS, f"{len(found)} rows"))


def cancel(
    operation_id: OperationId, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False
) -> None:
    """Cancel an operation."""
    with connected(url, token) as client:
        found = client.cancel_bulk(operation_id)
    emit(found, as_json, lambda: print_status(found))


def retry(
    operation_id: OperationId,
    row_numbers: Annotated[
        str | None, typer.Option("--rows", help="Only these rows, e.g. 1,2,7")
    ] = None,
    from_step: Annotated[
        str | None,
        typer.Option(
            "--from-step",
            help="Restart the rows from this step of a pipeline: it and the later steps "
            "run again (under new idempotency keys)",
        ),
    ] = None,
    include_completed: Annotated[
        bool,
        typer.Option(
            "--include-completed",
            help="Restart Completed rows too (a Completed operation included)",
        ),
    ] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Retry an operation's failed rows (all, or --rows), or restart them --from-step."""
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
    restart = {"from_step": from_step, "include_completed": include_completed}
    with connected(url, token) as client:
        found = (
            client.retry_bulk_rows(operation_id, chosen, **restart)
            if chosen
            else client.retry_bulk(operation_id, **restart)
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


def export(
    operation_id: OperationId,
    mode: Annotated[str, typer.Option("--mode", help="report or data")] = "report",
    file_format: Annotated[str, typer.Option("--format", help="csv, json, jsonl or xlsx")] = "csv",
    state: Annotated[
        str | None, typer.Option("--state", help="Only rows in this state, e.g. Failed")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File (default: standard output)")
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Export an operation's rows (all, or those in --state)."""
    with connected(url, token) as client, _sink(output) as out:
        written = client.export_bulk(operation_id, out, mode=mode, format=file_format, state=state)
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
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Save to this file instead")
    ] = None,
    file_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="csv, or xlsx for a workbook (needs --output)",
            click_type=click.Choice(["csv", "xlsx"]),
        ),
    ] = "csv",
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Print (or save) the header template of an operation: CSV, or an XLSX workbook."""
    if file_format == "xlsx":
        if output is None:
            raise fail("an xlsx template is a binary file: give --output FILE")
        with connected(url, token) as client, output.open("wb") as out:
            written = client.download_operation_template(name, out, format="xlsx")
        typer.echo(f"Wrote {written} bytes to {output}", err=True)
        return
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
