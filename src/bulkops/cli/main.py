"""The ``bulkops`` command: serve, worker, migrate, gateway, and the client commands
(``bulkops.cli.client``).

Every setting of ``bulkops.Settings`` is also a flag of ``serve`` and ``worker``; the flags
are generated from the settings model so the two never drift apart.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
from collections.abc import Callable
from typing import Any

import pydantic
import typer

from bulkops.cli import client as client_commands
from bulkops.cli.gateway import gateway
from bulkops.cli.maintenance import prune_events
from bulkops.errors import BulkOpsError
from bulkops.settings import Settings

app = typer.Typer(
    name="bulkops",
    help="Bulk operations as a service: upload a file, process every row, track each one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold tokens
)
app.command()(gateway)
client_commands.register(app, prune_events=prune_events)
log = logging.getLogger("bulkops")

# Settings of the HTTP server alone: not flags of commands that serve no HTTP.
HTTP_ONLY = ("max_header_bytes", "header_timeout", "body_timeout", "body_min_rate")

_CLI_TYPES: dict[Any, Any] = {
    bool: bool | None,
    int: int | None,
    float: float | None,
    str: str | None,
}


def _option_type(annotation: Any) -> Any:
    text = str(annotation)
    if "list[str]" in text:
        return list[str] | None
    for base, option in _CLI_TYPES.items():
        if annotation is base or annotation == base | None:
            return option
    return str | None


def _settings_parameters(exclude: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    parameters = []
    for name, info in Settings.model_fields.items():
        if name in exclude:
            continue
        flag = "--" + name.replace("_", "-")
        help_text = f"{info.description or ''} [BULKOPS_{name.upper()}]".strip()
        option = typer.Option(None, flag, help=help_text, show_default=False)
        parameters.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=option,
                annotation=_option_type(info.annotation),
            )
        )
    return parameters


def with_settings_flags(
    exclude: tuple[str, ...] = (),
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command one flag per setting; it is called with a ``Settings`` built from
    the flags given, over the ``BULKOPS_*`` environment."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        def wrapper(**flags: Any) -> None:
            overrides = {k: v for k, v in flags.items() if v is not None and v != []}
            try:
                settings = Settings(**overrides)
            except pydantic.ValidationError as exc:
                typer.echo(_settings_problems(exc), err=True)
                raise typer.Exit(2) from None
            _configure_logging(settings)
            try:
                command(settings)
            except BulkOpsError as exc:
                typer.echo(f"Error: {exc}", err=True)
                raise typer.Exit(1) from None

        wrapper.__name__ = command.__name__
        wrapper.__doc__ = command.__doc__
        wrapper.__signature__ = inspect.Signature(_settings_parameters(exclude))  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _settings_problems(error: pydantic.ValidationError) -> str:
    """One line per bad setting, naming its flag and environment variable."""
    lines = ["Invalid settings:"]
    for item in error.errors(include_url=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        field = str(item["loc"][0]) if item["loc"] else ""
        if field:
            flag = "--" + field.replace("_", "-")
            lines.append(f"  {flag} / BULKOPS_{field.upper()}: {message}")
        else:
            lines.append(f"  {message}")
    return "\n".join(lines)


def _configure_logging(settings: Settings) -> None:
    from bulkops.observability.logs import configure

    configure(settings.log_format)


@app.command()
@with_settings_flags()
def serve(settings: Settings) -> None:
    """Serve the HTTP API, and process operations in worker processes beside it (in the
    HTTP process with --worker-processes 0; nowhere with --role api)."""
    from bulkops.api.app import create_app
    from bulkops.cli import server
    from bulkops.supervisor import WorkerProcesses
    from bulkops.supervisor.interpreter import settle_interpreter

    _check_schema(settings)
    count = settings.effective_worker_processes if settings.role == "combined" else 0
    processes = WorkerProcesses(settings, count) if count else None
    try:
        application = create_app(settings=settings, processes=processes)
        settle_interpreter(settings)
        log.info(
            "bulkops %s instance on http://%s:%s (database %s%s)",
            settings.role,
            settings.host,
            settings.port,
            settings.database_url,
            f", {count} worker processes" if count else "",
        )
        # log_config=None: uvicorn's lines (start-up, errors, one per request) go through
        # the bulkops handler, in its format (JSON too), not uvicorn's copying, colouring one.
        server.run(
            application,
            host=settings.host,
            port=settings.port,
            limits=server.ClientLimits.of(settings),
            log_level="info",
            log_config=None,
        )
    finally:
        if processes is not None:
            processes.remove()


@app.command()
@with_settings_flags(
    exclude=(
        "host",
        "port",
        "role",
        "cors_origins",
        "openapi_enabled",
        "worker_processes",
        *HTTP_ONLY,
    )
)
def worker(settings: Settings) -> None:
    """Process operations from shared storage, without HTTP."""
    from bulkops.supervisor.interpreter import loop_factory, settle_interpreter
    from bulkops.worker import Worker

    async def run() -> None:
        instance = Worker(settings=settings)
        settle_interpreter(settings)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, instance.stop)
        log.info("bulkops worker started (database %s)", settings.database_url)
        await instance.run()
        log.info("bulkops worker stopped")

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(run())


def _check_schema(settings: Settings) -> None:
    """Refuse to start, before serving anything, on a database whose schema revision this
    code does not match: any other revision when it is not to migrate at start, else one
    newer than the code."""
    from bulkops.runtime import MEMORY_URL

    if settings.database_url.startswith(MEMORY_URL):
        return
    from bulkops.storage.sql.migrate import (
        check_schema,
        migrate_apart,
        refuse_newer,
        schema_revision,
    )

    if settings.migrate_on_start:
        found = schema_revision(settings.database_url)
        refuse_newer(found)
        migrate_apart(settings.database_url, found)
    else:
        check_schema(settings.database_url)


@app.command()
@with_settings_flags()
def migrate(settings: Settings) -> None:
    """Create or upgrade the database schema."""
    from bulkops.runtime import MEMORY_URL

    if settings.database_url.startswith(MEMORY_URL):
        typer.echo("In-memory storage needs no migrations")
        return
    from bulkops.storage.sql import migrate as apply_migrations

    apply_migrations(settings.database_url)
    typer.echo(f"Database is up to date: {settings.database_url}")


def main() -> None:
    """Entry point of the ``bulkops`` console script."""
    app()
