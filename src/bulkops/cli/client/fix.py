"""``bulkops fix ID FILE``: a corrected data export goes back into its operation.

FILE is what ``bulkops export ID --mode data`` wrote (CSV, JSON, JSON Lines or XLSX): the
file's own columns plus ``_rowNumber``, ``_state``, ``_errorType`` and ``_errorMessage``.
Each row's own columns (every column not starting with ``_``) are sent as that row's fix;
rows whose ``_state`` says they did not fail, or that no longer fail (fixed and retried by
an earlier run of the same file), are left alone. A row sent with the data it holds already
is unchanged (the server records no fix): it is listed apart and not retried. The server
checks each fix at once: the refused ones are listed on stderr with the server's reasons
and make the exit code 2. The fixed rows are then retried (unless ``--no-retry``), and a
summary printed.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import date, datetime
from datetime import time as dt_time
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from bulkops.cli.client.common import (
    EXIT_REFUSED,
    AsJson,
    OperationId,
    Token,
    Url,
    connected,
    fail,
    refusal,
)
from bulkops.client.errors import ApiError
from bulkops.client.http import DEFAULT_URL
from bulkops.client.models import RetryResult
from bulkops.client.sync_client import Client
from bulkops.wire import unescape_formula

ROW_NUMBER = "_rowNumber"
STATE = "_state"


class Fix(NamedTuple):
    """A row of the file: its number and own columns, or why it cannot be sent."""

    number: int | None
    data: dict[str, Any] | None
    problem: str | None = None
    skipped: bool = False  # its ``_state`` says it did not fail


class FixReport:
    """What became of each row of the file."""

    def __init__(self) -> None:
        self.fixed: list[int] = []
        self.unchanged: list[int] = []  # sent with the data they hold: not fixes, not retried
        self.refused: list[tuple[int | None, list[str]]] = []
        self.skipped: list[int] = []
        self.retry: RetryResult | None = None
        self.retry_refused: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The report as the JSON ``--json`` prints."""
        return {
            "fixed": self.fixed,
            "unchanged": self.unchanged,
            "refused": [{"rowNumber": n, "errors": errors} for n, errors in self.refused],
            "skipped": self.skipped,
            "retry": None
            if self.retry is None
            else self.retry.model_dump(mode="json", by_alias=True, exclude_none=True),
            "retryRefused": self.retry_refused,
        }


def fix(
    operation_id: OperationId,
    file: Annotated[
        Path,
        typer.Argument(
            help="A data export (csv, json, jsonl or xlsx) with _rowNumber, corrected",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ],
    no_retry: Annotated[
        bool, typer.Option("--no-retry", help="Only fix the rows; retry them later")
    ] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Send the corrected rows of a data export back as fixes, then retry them."""
    records = read_export(file)
    report = FixReport()
    with connected(url, token) as client:
        # An unknown id is one clear error, not one per row.
        operation = client.get_bulk(operation_id)
        failing = None
        if operation.status.is_terminal:  # else every fix is refused, and the server says why
            failing = {row.row_number for row in client.iter_errors(operation_id, page_size=1000)}
        for row in records:
            if failing is not None and row.number is not None and row.number not in failing:
                row = row._replace(skipped=True)
            _send(client, operation_id, row, report)
        if report.fixed and not no_retry:
            try:
                report.retry = client.retry_bulk_rows(operation_id, report.fixed)
            except ApiError as exc:
                if not exc.refused:
                    raise
                report.retry_refused = refusal(exc)
    _print(report, operation_id, as_json=as_json, retried=not no_retry)
    if report.refused or report.retry_refused:
        raise typer.Exit(EXIT_REFUSED)


def _send(client: Client, operation_id: str, row: Fix, report: FixReport) -> None:
    """One row's fix; a refusal is noted in the report, anything else stops the command."""
    if row.skipped and row.number is not None:
        report.skipped.append(row.number)
        return
    if row.number is None or row.data is None:
        report.refused.append((row.number, [row.problem or "not a row"]))
        return
    try:
        answer = client.fix_bulk_row(operation_id, row.number, row.data)
    except ApiError as exc:
        if not exc.refused:
            raise
        report.refused.append((row.number, exc.errors or [refusal(exc)]))
        return
    (report.unchanged if answer.unchanged else report.fixed).append(row.number)


def _print(report: FixReport, operation_id: str, *, as_json: bool, retried: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
        return
    for number, problems in report.refused:
        where = f"row {number}" if number is not None else "a row"
        typer.echo(f"Error: {where} refused: {'; '.join(problems)}", err=True)
    parts = [f"{len(report.fixed)} rows fixed", f"{len(report.refused)} refused"]
    if report.unchanged:
        parts.append(f"{len(report.unchanged)} unchanged (same data, not retried)")
    if report.skipped:
        parts.append(f"{len(report.skipped)} skipped (not failed)")
    typer.echo(", ".join(parts))
    if report.retry is not None:
        typer.echo(
            f"Retry: {report.retry.rows_submitted} rows submitted, "
            f"{report.retry.rows_skipped} skipped"
        )
    elif report.retry_refused is not None:
        typer.echo(f"Error: retry refused: {report.retry_refused}", err=True)
    elif report.fixed and not retried:
        numbers = ",".join(str(n) for n in report.fixed)
        typer.echo(f"Not retried; later: bulkops retry {operation_id} --rows {numbers}")


def read_export(path: Path) -> Iterator[Fix]:
    """The rows of a data export, each with its ``_rowNumber`` and own columns. A file of
    another kind, or without ``_rowNumber``, is a usage error (exit 2)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows: Iterator[dict[str, Any]] = _csv_rows(path)
    elif suffix == ".json":
        rows = _json_rows(path)
    elif suffix in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(path)
    elif suffix == ".xlsx":
        rows = _xlsx_rows(path)
    else:
        raise fail(
            f"{path.name}: a data export is .csv, .json, .jsonl or .xlsx, not {suffix or '?'}"
        )
    return _fixes(path, rows)


def _fixes(path: Path, rows: Iterator[dict[str, Any]]) -> Iterator[Fix]:
    for row in rows:
        if ROW_NUMBER not in row:
            raise fail(
                f"{path.name} has no {ROW_NUMBER} column: export the rows to fix with "
                "`bulkops export ID --state Failed --mode data`"
            )
        number = row[ROW_NUMBER]
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if not isinstance(number, int) or isinstance(number, bool):
            yield Fix(None, None, f"{ROW_NUMBER} {number!r} is not a row number")
            continue
        if row.get(STATE) not in (None, "", "Failed"):
            yield Fix(number, None, skipped=True)
            continue
        yield Fix(number, {key: value for key, value in row.items() if not key.startswith("_")})


def _csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    # A CSV export puts a ``'`` before cells a spreadsheet would run as formulas (see
    # ``bulkops.wire.escape_formula``); removed here, the round trip changes nothing.
    with path.open(newline="", encoding="utf-8-sig") as fh:
        for row in csv.DictReader(fh):
            yield {unescape_formula(k): unescape_formula(v) for k, v in row.items()}


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    # An export of the rows to fix is small next to the operation: read it whole.
    try:
        items = json.loads(path.read_text(encoding="utf-8-sig"))
    except ValueError as exc:
        raise fail(f"{path.name} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise fail(f"{path.name}: a JSON data export is an array of rows")
    for item in items:
        yield _object(path, item)


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8-sig") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise fail(f"{path.name} line {number} is not JSON: {exc}") from None
            yield _object(path, item)


def _xlsx_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The first worksheet's rows under its first non-empty row, cells as a CSV cell would
    read them (a blank cell is an empty string, as in a CSV export)."""
    from zipfile import BadZipFile

    import openpyxl

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (BadZipFile, OSError, KeyError, ValueError) as exc:
        raise fail(f"{path.name} is not a readable workbook: {exc}") from None
    try:
        header: list[str] | None = None
        for values in book.worksheets[0].iter_rows(values_only=True):
            cells = [_cell_text(value) for value in values]
            if not any(cells):
                continue
            if header is None:
                header = cells
                continue
            yield {
                name: cells[i] if i < len(cells) else "" for i, name in enumerate(header) if name
            }
    finally:
        book.close()


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime) and value == datetime.combine(value.date(), dt_time()):
        return value.date().isoformat()
    if isinstance(value, date | dt_time):
        return value.isoformat()
    return str(value)


def _object(path: Path, item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise fail(f"{path.name}: each row of a data export is a JSON object")
    return item
