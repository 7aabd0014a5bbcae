"""What every client command shares: its options, the connection, errors and exit codes.

Exit codes: 0 success (with ``--wait``: Completed), 3 CompletedWithErrors, 4 Failed,
5 Cancelled, 2 a request the server refused (4xx) or a usage error, 1 anything else
(server unreachable, 5xx).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from bulkops.client.errors import ApiError
from bulkops.client.models import Model, StatusView
from bulkops.client.sync_client import Client

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


def refusal(exc: ApiError) -> str:
    """The server's message, with its reason when it gave one apart."""
    message = exc.message
    if exc.reason and exc.reason not in message:
        message += f" ({exc.reason})"
    return message


@contextmanager
def connected(url: str, token: str | None) -> Iterator[Client]:
    """A client; an ApiError becomes one line on stderr and the contract's exit code."""
    logging.getLogger("stamina").setLevel(logging.ERROR)  # retries are not news on a terminal
    try:
        with Client(url, token=token) as client:
            yield client
    except ApiError as exc:
        raise fail(refusal(exc), EXIT_REFUSED if exc.refused else EXIT_OTHER) from None


def emit(value: Any, as_json: bool, plain: Callable[[], None]) -> None:
    """Print ``value`` as the server's JSON, or as ``plain`` says."""
    if as_json:
        typer.echo(json.dumps(jsonable(value), indent=2, default=str))
    else:
        plain()


def jsonable(value: Any) -> Any:
    """A model (or a list of them) as the server's camelCase JSON value."""
    if isinstance(value, Model):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    return value


def json_argument(text: str | None, what: str) -> Any:
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


def print_status(status: StatusView) -> None:
    """One line: status, rows, errors, progress."""
    typer.echo(
        f"{status.status.value}: {status.processed_rows}/{status.total_rows} rows, "
        f"{status.error_count} errors ({status.progress}%)"
    )
