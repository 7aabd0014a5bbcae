"""Lists of items for people and for programs: a table on a terminal, tab-separated lines
when standard output is piped or redirected.

Piped, a list is a header line of column names (the API's JSON field names) and then one
line per item with every value in full: no box drawing, no truncation, no wrapping. Empty
values are empty fields, booleans ``true``/``false``, times ISO 8601; a tab, newline,
carriage return or backslash inside a value is written ``\\t``, ``\\n``, ``\\r``, ``\\\\``
so each item stays one line. Summary lines ("3 failed rows") go to stderr there, so stdout
holds only the list (``tail -n +2`` drops the header).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar

import typer

T = TypeVar("T")

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


@dataclass(frozen=True, slots=True)
class Column(Generic[T]):
    """One column of a list.

    Attributes:
        name: The header of the tab-separated form (the API's field name).
        title: The header of the table on a terminal.
        value: The item's value.
        in_table: Shown in the table on a terminal.
        in_tsv: Written in the tab-separated form.
    """

    name: str
    title: str
    value: Callable[[T], Any]
    in_table: bool = True
    in_tsv: bool = True


def piped() -> bool:
    """Standard output is not a terminal (a pipe, a file, a test runner)."""
    return not sys.stdout.isatty()


def show(items: Sequence[T], columns: Sequence[Column[T]], summary: str | None = None) -> None:
    """Print ``items``: tab-separated lines when piped, else a table; then ``summary``."""
    if piped():
        written = [column for column in columns if column.in_tsv]
        typer.echo("\t".join(column.name for column in written))
        for item in items:
            typer.echo("\t".join(field(column.value(item)) for column in written))
        if summary:
            typer.echo(summary, err=True)
        return
    from rich.console import Console
    from rich.table import Table

    shown = [column for column in columns if column.in_table]
    table = Table(*(column.title for column in shown))
    for item in items:
        table.add_row(*(cell(column.value(item)) for column in shown))
    Console().print(table)
    if summary:
        typer.echo(summary)


def field(value: Any) -> str:
    """A value as a tab-separated field: full, escaped to stay on one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        value = value.value
    elif isinstance(value, datetime):
        value = value.isoformat()
    return str(value).translate(_ESCAPES)


def cell(value: Any) -> str:
    """A value as a table cell, for reading."""
    if value is None or value is False:
        return ""
    if value is True:
        return "yes"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)
