"""Column maps: the ``columnMap`` form field, and suggestions when a file's columns do not
match the row model."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bulkops.definition.operation import OperationDefinition
from bulkops.errors import BadRequest, Unprocessable
from bulkops.formats.base import renamed

MAX_ENTRIES = 1000
_NOT_ALPHANUMERIC = re.compile(r"[\W_]+")


def parse_column_map(definition: OperationDefinition, text: str | None) -> dict[str, str] | None:
    """The ``columnMap`` form value as file column -> model column (the column's external
    name), or None when absent.

    A target may name a row field by its alias or by its field name.

    Raises:
        BadRequest: the value is not a JSON object of strings.
        Unprocessable: a well-formed map that does not fit the operation (an unnamed file
            column, or a target that names no column of the row model); it carries the
            validation result, with the problem among its ``fileErrors``.
    """
    if text is None or not text.strip():
        return None
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        raise BadRequest("Malformed columnMap: not valid JSON") from None
    if not isinstance(data, dict) or len(data) > MAX_ENTRIES:
        raise BadRequest(
            f"Malformed columnMap: expected a JSON object of at most {MAX_ENTRIES} entries "
            "mapping file columns to row fields"
        )
    targets = _targets(definition)
    mapped: dict[str, str] = {}
    for source, target in data.items():
        if not isinstance(target, str):
            raise BadRequest(f"Malformed columnMap: {source!r} must map to a field name")
        if not source.strip():
            raise _misfit(f"columnMap maps an unnamed file column to {target!r}")
        column = targets.get(target)
        if column is None:
            known = ", ".join(definition.columns)
            raise _misfit(
                f"columnMap maps {source!r} to {target!r}, which is not a column of "
                f"{definition.name!r} (columns: {known})"
            )
        mapped[source] = column
    return mapped or None


def _misfit(message: str) -> Unprocessable:
    return Unprocessable(message, valid=False, metadataErrors=[], fileErrors=[message])


def _targets(definition: OperationDefinition) -> dict[str, str]:
    """Every name a map may target (alias or field name) -> the external column name."""
    model = definition.row_model
    names: dict[str, str] = {}
    for field, info in model.model_fields.items():
        external = info.alias or field
        names[field] = names[external] = external
    return names


def _normalised(name: str) -> str:
    return _NOT_ALPHANUMERIC.sub("", name).casefold()


def suggest_column_map(
    columns: Sequence[str],
    file_columns: Sequence[str],
    column_map: Mapping[str, str] | None,
) -> dict[str, str]:
    """A mapping for the model columns the file lacks, from file columns that match them
    once case, spaces and punctuation are ignored (``E-Mail`` -> ``email``). Columns the
    readers already match (exactly or case-insensitively) need no entry."""
    present = {name.strip().casefold() for name in renamed(file_columns, column_map)}
    missing = [column for column in columns if column.casefold() not in present]
    mapped_sources = set(column_map or {})
    by_shape: dict[str, str] = {}
    for name in file_columns:
        if name not in mapped_sources:
            by_shape.setdefault(_normalised(name), name)
    suggestion: dict[str, str] = {}
    for column in missing:
        source = by_shape.get(_normalised(column))
        if source is not None and source not in suggestion:
            suggestion[source] = column
    return suggestion
