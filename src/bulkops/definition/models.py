"""Base models for an operation's metadata and rows."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Metadata(BaseModel):
    """Base class for the metadata submitted with a file.

    Fields are exposed under camelCase aliases (``requested_by`` -> ``requestedBy``); the
    snake_case names are accepted too.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Row(BaseModel):
    """Base class for one data row of a file.

    A CSV column or JSON key maps to a field by the field's alias, else its name. Columns the
    model does not declare are ignored; an empty CSV cell counts as a missing value.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    def row_id(self) -> str | None:
        """An optional business key for this row, shown as ``rowId`` (default: none)."""
        return None


def column_name(model: type[BaseModel], field_name: str) -> str:
    """The external name of a model field: its alias, else its name."""
    info = model.model_fields[field_name]
    return info.alias or field_name


def dump_metadata(metadata: Metadata) -> dict[str, Any]:
    """Metadata as the JSON object stored with the operation (camelCase keys).

    Fields the submission left out are left out (their defaults apply again when the
    metadata is read back); an explicit null is kept, so a required field that may be
    null still validates when processing starts.
    """
    return metadata.model_dump(mode="json", by_alias=True, exclude_unset=True)
