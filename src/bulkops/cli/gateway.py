"""``bulkops gateway``: one address over several bulkops services.

Every gateway setting is a flag (``--http-timeout``) and a variable
(``BULKOPS_GATEWAY_HTTP_TIMEOUT``); backends are given as repeated ``--backend NAME=URL``.
The flags are generated from ``GatewaySettings`` so the two never drift apart.
"""

from __future__ import annotations

import inspect
import logging
import sys
from typing import Any

import pydantic
import typer

from bulkops.gateway.settings import GatewaySettings

log = logging.getLogger("bulkops.gateway")

_FLAG_TYPES: dict[Any, Any] = {bool: bool | None, int: int | None, float: float | None}


def _flag(name: str) -> str:
    return "--backend" if name == "backends" else "--" + name.replace("_", "-")


def _parameters() -> list[inspect.Parameter]:
    parameters = []
    for name, info in GatewaySettings.model_fields.items():
        help_text = f"{info.description or ''} [{GatewaySettings.env_name(name)}]".strip()
        if name == "backends":
            help_text = (
                "A backend as NAME=URL (NAME alone: http://NAME); repeat for each backend "
                "[BULKOPS_GATEWAY_BACKENDS as NAME=URL,NAME=URL]"
            )
            annotation: Any = list[str] | None
        elif name == "cors_origins":
            annotation = list[str] | None
        else:
            annotation = _FLAG_TYPES.get(info.annotation, str | None)
        option = typer.Option(None, _flag(name), help=help_text, show_default=False)
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
            )
        )
    return parameters


def _problems(error: pydantic.ValidationError) -> str:
    """One line per bad setting, naming its flag and environment variable."""
    lines = ["Invalid gateway settings:"]
    for item in error.errors(include_url=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        field = str(item["loc"][0]) if item["loc"] else ""
        if field in GatewaySettings.model_fields:
            lines.append(f"  {_flag(field)} / {GatewaySettings.env_name(field)}: {message}")
        else:
            lines.append(f"  {message}")
    return "\n".join(lines)


def gateway(**flags: Any) -> None:
    """Serve one address over several bulkops services (--backend NAME=URL, repeatable)."""
    from bulkops.cli import server
    from bulkops.gateway.app import create_gateway

    overrides = {k: v for k, v in flags.items() if v is not None and v != []}
    try:
        settings = GatewaySettings(**overrides)
    except pydantic.ValidationError as exc:
        typer.echo(_problems(exc), err=True)
        raise typer.Exit(2) from None
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per backend call otherwise
    application = create_gateway(settings=settings)
    log.info("bulkops gateway on http://%s:%s", settings.host, settings.port)
    # uvicorn exits non-zero when start-up fails (duplicate operation names across backends).
    server.run(
        application,
        host=settings.host,
        port=settings.port,
        limits=server.ClientLimits.of(settings),
        log_level="info",
    )


gateway.__signature__ = inspect.Signature(_parameters())  # type: ignore[attr-defined]
