"""mkdocs hooks: the reference pages' tables, generated from the code at every build.

A page asks for a table with an HTML comment on a line of its own:

- ``<!-- bulkops:settings -->``: every field of ``bulkops.Settings`` (variable, flag, type,
  default, meaning);
- ``<!-- bulkops:gateway-settings -->``: the same for ``bulkops.GatewaySettings``;
- ``<!-- bulkops:cli -->``: every command of the ``bulkops`` program, from its typer app;
- ``<!-- bulkops:routes -->``: every route of the HTTP API, from the served OpenAPI description;
- ``<!-- bulkops:transitions -->``: the table of legal operation status changes;
- ``<!-- bulkops:enum NAME -->``: the members of a status enum and the comment that says
  what each means.

A setting whose field has no ``Field(description=...)`` and an unknown marker are logged as
errors, which fail the strict build (as errors, not warnings: ``--quiet`` hides warnings
from the strict count). A setting's meaning is written once, on its field (which also gives
its CLI flag its help), so the reference cannot fall behind the code.
"""

from __future__ import annotations

import enum
import inspect
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

log = logging.getLogger("mkdocs.hooks.bulkops")

_MARKER = re.compile(r"^<!-- bulkops:(?P<name>[a-z-]+)(?: (?P<arg>\w+))? -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace every ``<!-- bulkops:... -->`` marker of a page with its generated table."""
    if "<!-- bulkops:" not in markdown:
        return markdown

    def render(match: re.Match[str]) -> str:
        name, arg = match["name"], match["arg"]
        renderer = _RENDERERS.get(name)
        if renderer is None:
            log.error("%s: unknown marker bulkops:%s", page.file.src_path, name)
            return ""
        return renderer(arg)

    return _MARKER.sub(render, markdown)


# --- settings -------------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(arg) for arg in typing.get_args(annotation))
        return f"{origin.__name__}[{args}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if value is None or value in ([], {}):
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _settings_table(model: Any, flag_of: Callable[[str], str]) -> str:
    lines = [
        "| Variable | Flag | Type | Default | Meaning |",
        "|---|---|---|---|---|",
    ]
    for name, info in model.model_fields.items():
        description = info.description or ""
        if not description.strip():
            log.error(
                "setting %s.%s has no description: give its Field one "
                '(Field(..., description="..."))',
                model.__name__,
                name,
            )
        env = _env_name(model, name, info)
        lines.append(
            f"| `{env}` | `{flag_of(name)}` | {_type_name(info.annotation)} | "
            f"{_default(info)} | {_cell(description)} |"
        )
    return "\n".join(lines)


def _env_name(model: Any, name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return str(choices[0])
    if isinstance(alias, str):
        return alias
    prefix = model.model_config.get("env_prefix", "")
    return f"{prefix}{name}".upper()


def _instance_settings(_: str | None) -> str:
    from bulkops.settings import Settings

    return _settings_table(Settings, lambda name: "--" + name.replace("_", "-"))


def _gateway_settings(_: str | None) -> str:
    from bulkops.gateway import GatewaySettings

    def flag(name: str) -> str:
        return "--backend" if name == "backends" else "--" + name.replace("_", "-")

    return _settings_table(GatewaySettings, flag)


# --- command line ---------------------------------------------------------------------------


def _setting_flags() -> set[str]:
    from bulkops.gateway import GatewaySettings
    from bulkops.settings import Settings

    return set(Settings.model_fields) | set(GatewaySettings.model_fields)


# typer ships its own copy of click: its objects are used by their attributes alone.


def _param_row(param: Any) -> str:
    if param.param_type_name == "argument":
        name = f"`{param.name.upper()}`"
        help_text = getattr(param, "help", None) or ""
        required = "required" if param.required else "optional"
        return f"| {name} | {_cell(help_text)} ({required} argument) | |"
    names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    if not param.is_flag:
        names += f" {param.type.name.upper()}"
    envvar = param.envvar if isinstance(param.envvar, str) else None
    default = param.default
    shown = ""
    if param.show_default is not False and default not in (None, False, (), []):
        shown = f"`{default}`"
    if envvar:
        shown = f"{shown} (`{envvar}`)".strip()
    return f"| {names} | {_cell(param.help or '')} | {shown} |"


def _usage(name: str, command: Any) -> str:
    pieces = [f"bulkops {name}", "[OPTIONS]"]
    for param in command.params:
        if param.param_type_name == "argument":
            metavar = param.name.upper()
            pieces.append(metavar if param.required else f"[{metavar}]")
    return " ".join(pieces)


def _command_section(name: str, command: Any, setting_flags: set[str]) -> str:
    help_text = inspect.cleandoc(command.help or "")
    lines = [f"### `bulkops {name}`", "", help_text, "", f"    {_usage(name, command)}", ""]
    own = [p for p in command.params if p.name not in setting_flags]
    settings = [p for p in command.params if p.name in setting_flags]
    rows = [_param_row(p) for p in own if p.name != "help"]
    if rows:
        lines += ["| Parameter | Meaning | Default (variable) |", "|---|---|---|", *rows, ""]
    if settings:
        lines.append(_settings_flags_note(name, settings))
        lines.append("")
    return "\n".join(lines)


def _settings_flags_note(name: str, settings: Iterable[Any]) -> str:
    flags = [p for p in settings if p.param_type_name == "option"]
    page = "#gateway-settings" if name == "gateway" else "#service-settings"
    label = "gateway setting" if name == "gateway" else "setting"
    return (
        f"Every {label} is also a flag of `bulkops {name}` ({len(flags)} flags, e.g. "
        f"`{flags[0].opts[0]}`): see [Settings](settings.md{page}). A flag wins over its "
        "variable."
    )


def _cli(_: str | None) -> str:
    import typer.main

    from bulkops.cli.main import app

    group: Any = typer.main.get_command(app)
    setting_flags = _setting_flags()
    sections = [
        _command_section(name, command, setting_flags) for name, command in group.commands.items()
    ]
    return "\n".join(sections)


# --- HTTP routes ----------------------------------------------------------------------------


def _first_sentence(text: str) -> str:
    text = " ".join(text.split()).replace("``", "`")
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def _routes(_: str | None) -> str:
    from bulkops.api.app import create_app
    from bulkops.settings import Settings

    memory = "memory://"
    app = create_app(settings=Settings(database_url=memory, files_url=memory))
    lines = ["| Route | operationId | What | Answers |", "|---|---|---|---|"]
    for path, methods in app.openapi()["paths"].items():
        for method, route in methods.items():
            answers = ", ".join(sorted(route.get("responses", {})))
            what = _first_sentence(route.get("description") or route.get("summary") or "")
            lines.append(
                f"| `{method.upper()} {path}` | `{route.get('operationId', '')}` | "
                f"{_cell(what)} | {answers} |"
            )
    return "\n".join(lines)


# --- states ---------------------------------------------------------------------------------


def _transitions(_: str | None) -> str:
    from bulkops.storage.states import TRANSITIONS, OperationStatus

    lines = ["| To | From |", "|---|---|"]
    for target in OperationStatus:
        sources = TRANSITIONS.get(target, frozenset())
        ordered = [f"`{s.value}`" for s in OperationStatus if s in sources]
        lines.append(f"| `{target.value}` | {', '.join(ordered) or 'never: created so'} |")
    return "\n".join(lines)


def _enum(name: str | None) -> str:
    from bulkops.storage import states

    cls = getattr(states, name or "", None)
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
        log.error("bulkops:enum names no enumeration of bulkops.storage.states: %s", name)
        return ""
    comments = _member_comments(cls)
    lines = ["| Value | Meaning |", "|---|---|"]
    for member in cls:
        lines.append(f"| `{member.value}` | {_cell(comments.get(member.name, ''))} |")
    return "\n".join(lines)


def _member_comments(cls: type) -> dict[str, str]:
    """Each member's trailing comment in the class source: what that value means."""
    source = inspect.getsource(cls)
    found = re.finditer(r"^\s+(?P<name>[A-Z_]+) = \"[^\"]*\"\s+# (?P<text>.+)$", source, re.M)
    return {match["name"]: match["text"].strip() for match in found}


_RENDERERS: dict[str, Callable[[str | None], str]] = {
    "settings": _instance_settings,
    "gateway-settings": _gateway_settings,
    "cli": _cli,
    "routes": _routes,
    "transitions": _transitions,
    "enum": _enum,
}
