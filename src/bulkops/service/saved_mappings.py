"""Saved column mappings: a ``columnMap`` kept under a name per operation and tenant, and
reused by create and validate (``mapping=<name>``)."""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from bulkops.clock import utcnow
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.errors import BadRequest, NotFound, Unprocessable
from bulkops.service.columns import parse_column_map
from bulkops.storage.ports import MappingStore
from bulkops.storage.records import SavedMapping

# A name travels in a URL path and a form field: letters, digits, spaces and . _ - only.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}")


class MappingLookup(Protocol):
    """What create and validate need of saved mappings."""

    async def find(
        self, operation_name: str, name: str, tenant: str | None
    ) -> dict[str, str] | None:
        """The column map saved under ``name`` for the operation and tenant, or None."""


def check_name(name: str) -> str:
    """A mapping's name, stripped.

    Raises:
        BadRequest: empty, longer than 100 characters, or with other characters than
            letters, digits, spaces, ``.``, ``_`` and ``-`` (starting with a letter or digit).
    """
    value = name.strip()
    if not _NAME.fullmatch(value):
        raise BadRequest(
            f"A mapping name is 1 to 100 letters, digits, spaces, '.', '_' or '-', starting "
            f"with a letter or digit, got {value[:100]!r}"
        )
    return value


class MappingService:
    """Save, list, read and delete the column mappings of operations, per tenant."""

    def __init__(self, registry: Registry, store: MappingStore) -> None:
        self._registry = registry
        self._store = store

    def _definition(self, operation_name: str) -> OperationDefinition:
        definition = self._registry.get(operation_name)
        if definition is None:
            raise NotFound(f"Unknown operation {operation_name!r}")
        return definition

    async def save(
        self, operation_name: str, name: str, column_map: Any, tenant: str | None
    ) -> SavedMapping:
        """Keep ``column_map`` under ``name`` (replacing one of that name).

        Raises:
            NotFound: unknown operation.
            BadRequest: a malformed name.
            Unprocessable: the map is not an object of file column -> column of the
                operation's rows, or is empty.
        """
        definition = self._definition(operation_name)
        checked = check_name(name)
        if not isinstance(column_map, dict) or not column_map:
            raise Unprocessable(
                "columnMap must be a non-empty JSON object of file column -> row column"
            )
        try:
            parsed = parse_column_map(definition, json.dumps(column_map))
        except (BadRequest, Unprocessable) as exc:
            raise Unprocessable(exc.message) from None
        mapping = SavedMapping(tenant, definition.name, checked, dict(parsed or {}), utcnow())
        await self._store.save_mapping(mapping)
        return mapping

    async def list(self, operation_name: str, tenant: str | None) -> list[SavedMapping]:
        """The tenant's mappings of the operation, by name.

        Raises:
            NotFound: unknown operation.
        """
        definition = self._definition(operation_name)
        return await self._store.list_mappings(tenant, definition.name)

    async def get(self, operation_name: str, name: str, tenant: str | None) -> SavedMapping:
        """One saved mapping.

        Raises:
            NotFound: unknown operation or mapping.
        """
        definition = self._definition(operation_name)
        found = await self._store.get_mapping(tenant, definition.name, name.strip())
        if found is None:
            raise NotFound(f"No mapping {name.strip()[:100]!r} for operation {definition.name!r}")
        return found

    async def delete(self, operation_name: str, name: str, tenant: str | None) -> None:
        """Remove a saved mapping.

        Raises:
            NotFound: unknown operation or mapping.
        """
        definition = self._definition(operation_name)
        if not await self._store.delete_mapping(tenant, definition.name, name.strip()):
            raise NotFound(f"No mapping {name.strip()[:100]!r} for operation {definition.name!r}")

    async def find(
        self, operation_name: str, name: str, tenant: str | None
    ) -> dict[str, str] | None:
        """The column map saved under ``name`` for the operation and tenant, or None."""
        definition = self._registry.get(operation_name)
        if definition is None:
            return None
        found = await self._store.get_mapping(tenant, definition.name, name)
        return None if found is None else found.column_map
