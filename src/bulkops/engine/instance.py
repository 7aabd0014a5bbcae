"""An operation made ready to run rows: its metadata converted and validated, and the
instance of its class that runs them."""

from __future__ import annotations

from typing import Any

from bulkops.definition.conversion import convert
from bulkops.definition.models import Metadata
from bulkops.definition.operation import OperationBase, OperationDefinition
from bulkops.engine.invoke import error_text, invoke
from bulkops.errors import ValidationError


class OperationFailed(Exception):
    """The operation as a whole cannot be processed (internal to the engine)."""


async def instantiate(
    definition: OperationDefinition, raw_metadata: dict[str, Any]
) -> tuple[Metadata, OperationBase[Any, Any]]:
    """The operation's metadata and a new instance of it that validated them.

    Raises:
        OperationFailed: the metadata are invalid.
    """
    try:
        metadata = convert(definition.metadata_model, raw_metadata)
    except ValidationError as exc:
        raise OperationFailed(f"Invalid metadata: {exc}") from None
    instance = definition.instantiate()
    if definition.overrides_validate_metadata:
        try:
            await invoke(instance.validate_metadata, metadata)
        except Exception as exc:
            raise OperationFailed(f"Metadata validation failed: {error_text(exc)}") from None
    return metadata, instance
