"""Field descriptors: the input shape of an operation as discovery shows it."""

from __future__ import annotations

import types
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin
from uuid import UUID

from pydantic import BaseModel

_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    # bool before int: bool is a subclass of int.
    (bool, "bool"),
    (int, "int"),
    (float, "float"),
    (Decimal, "decimal"),
    (datetime, "datetime"),  # before date: datetime is a subclass of date
    (date, "date"),
    (UUID, "guid"),
    (str, "string"),
)


@dataclass(frozen=True, slots=True)
class FieldDescriptor:
    """One metadata field or file column."""

    name: str
    type: str
    required: bool


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(get_args(annotation))
        if len(args) == 1:
            return args[0], nullable
        return annotation, nullable
    return annotation, False


def type_name(annotation: Any) -> str:
    """Discovery type of an annotation: string, int, decimal, bool, datetime, guid, date or
    float, with a trailing ``?`` when None is allowed."""
    inner, nullable = _unwrap_optional(annotation)
    name = "string"
    if get_origin(inner) is Literal:
        name = "string"
    elif isinstance(inner, type):
        if issubclass(inner, Enum):
            name = "string"
        else:
            name = next((n for t, n in _TYPE_NAMES if issubclass(inner, t)), "string")
    return f"{name}?" if nullable else name


def describe(model: type[BaseModel]) -> list[FieldDescriptor]:
    """Descriptors of a model's fields, named by alias (else name), in declaration order.

    ``required`` comes from the declaration only: rules enforced in code are not visible.
    """
    return [
        FieldDescriptor(
            name=info.alias or field_name,
            type=type_name(info.annotation),
            required=info.is_required(),
        )
        for field_name, info in model.model_fields.items()
    ]
