"""Turning raw values into validated models, with error messages that name the field."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from pydantic import BaseModel

from bulkops.errors import ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)

_MAX_SHOWN_INPUT = 40


def describe_errors(error: pydantic.ValidationError) -> str:
    """One line naming each failing field, e.g. ``age: Input should be a valid integer``."""
    return "; ".join(error_lines(error))


def error_lines(error: pydantic.ValidationError) -> list[str]:
    """One message per failing field, each starting with the field's external name."""
    parts = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"]) or "row"
        message = item["msg"]
        if item["type"] != "missing" and isinstance(item.get("input"), str | int | float):
            shown = repr(item["input"])
            if len(shown) > _MAX_SHOWN_INPUT:
                shown = shown[: _MAX_SHOWN_INPUT - 3] + "..."
            message = f"{message} (got {shown})"
        parts.append(f"{location}: {message}")
    return parts


def convert(model: type[ModelT], values: dict[str, Any]) -> ModelT:
    """Validate ``values`` into ``model``.

    Args:
        model: The pydantic model.
        values: Field values keyed by column name (alias or field name).

    Raises:
        ValidationError: with a message naming each failing field.
    """
    try:
        return model.model_validate(values)
    except pydantic.ValidationError as exc:
        raise ValidationError(describe_errors(exc)) from None
