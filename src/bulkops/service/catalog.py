"""Discovery of registered operations and their templates (CSV or XLSX)."""

from __future__ import annotations

import csv
import io

from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.errors import BadRequest, NotFound
from bulkops.formats.base import XLSX_MEDIA_TYPE
from bulkops.formats.workbook import header_workbook
from bulkops.wire import escape_formula

CSV_MEDIA_TYPE = "text/csv; charset=utf-8"


class CatalogService:
    """What operations exist and what input they take."""

    def __init__(self, registry: Registry, *, escape_formulas: bool = True) -> None:
        self._registry = registry
        # Template headers are cells like any other (``bulkops.wire.escape_formula``).
        self._escape = escape_formulas

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
        header = [escape_formula(c) for c in definition.columns] if self._escape else None
        csv.writer(buffer, lineterminator="\r\n").writerow(header or definition.columns)
        return buffer.getvalue(), f"{definition.name}-template.csv"

    def template_file(self, name: str, file_format: str | None = None) -> tuple[bytes, str, str]:
        """The template as ``file_format`` (``csv``, the default, or ``xlsx``, any case):
        its bytes, file name and media type. The XLSX template is a workbook whose one
        sheet holds the header row.

        Raises:
            NotFound: no such operation.
            BadRequest: another format.
        """
        # Absent means CSV; an empty value is outside the enum like any other (400).
        chosen = "csv" if file_format is None else file_format.strip().casefold()
        if chosen == "csv":
            text, file_name = self.template(name)
            return text.encode(), file_name, CSV_MEDIA_TYPE
        if chosen != "xlsx":
            raise BadRequest(f"Invalid format '{file_format}': expected one of csv, xlsx")
        definition = self.get(name)
        content = header_workbook(definition.columns, sheet_name=definition.name[:31])
        return content, f"{definition.name}-template.xlsx", XLSX_MEDIA_TYPE
