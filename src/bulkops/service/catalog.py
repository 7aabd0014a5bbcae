"""Discovery of registered operations and their CSV templates."""

from __future__ import annotations

import csv
import io

from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.errors import NotFound


class CatalogService:
    """What operations exist and what input they take."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def operations(self) -> list[OperationDefinition]:
        """Every registered operation, by name."""
        return list(self._registry)

    def get(self, name: str) -> OperationDefinition:
        """One operation by name (case-insensitive), or ``NotFound``."""
        definition = self._registry.get(name)
        if definition is None:
            raise NotFound(f"Unknown operation {name!r}")
        return definition

    def template(self, name: str) -> tuple[str, str]:
        """A CSV holding the header row of the operation's file columns, and its file name."""
        definition = self.get(name)
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerow(definition.columns)
        return buffer.getvalue(), f"{definition.name}-template.csv"
