"""The saved-mapping commands: ``mappings``, ``mapping-save`` and ``mapping-delete``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bulkops.cli.client.common import AsJson, Token, Url, connected, emit, fail, json_argument
from bulkops.cli.client.listing import Column, show
from bulkops.client.http import DEFAULT_URL
from bulkops.client.models import SavedMapping

OperationName = Annotated[str, typer.Argument(help="Operation name", show_default=False)]
MappingName = Annotated[str, typer.Argument(help="Mapping name", show_default=False)]

MAPPING_COLUMNS: list[Column[SavedMapping]] = [
    Column("name", "Mapping", lambda m: m.name),
    Column("columnMap", "Column map", lambda m: json.dumps(m.column_map)),
]


def mappings(
    operation: OperationName,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List the column mappings saved for an operation (submit --mapping NAME uses one)."""
    with connected(url, token) as client:
        found = client.get_operation_mappings(operation)
    body = {"items": [m.model_dump(by_alias=True) for m in found]}
    emit(body, as_json, lambda: show(found, MAPPING_COLUMNS))


def mapping_save(
    operation: OperationName,
    mapping: MappingName,
    column_map: Annotated[
        str,
        typer.Option(
            "--column-map",
            help="File column -> field, as JSON, or @file",
            show_default=False,
        ),
    ],
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Save a column mapping under a name for an operation (replacing one of that name)."""
    columns = json_argument(column_map, "--column-map")
    if not isinstance(columns, dict):
        raise fail("--column-map must be a JSON object")
    with connected(url, token) as client:
        saved = client.save_operation_mapping(operation, mapping, columns)
    emit(saved, as_json, lambda: typer.echo(f"Saved mapping {saved.name!r} of {operation}"))


def mapping_delete(
    operation: OperationName,
    mapping: MappingName,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Delete a saved column mapping."""
    with connected(url, token) as client:
        client.delete_operation_mapping(operation, mapping)
    typer.echo(f"Deleted mapping {mapping!r} of {operation}")
