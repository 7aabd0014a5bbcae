"""Checking a file before it is submitted: header, first rows, row validation."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bulkops.definition.conversion import convert
from bulkops.definition.models import Metadata, Row
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.row_context import NO_OPERATION_ID, RowScope, row_frame
from bulkops.engine.invoke import error_text, invoke
from bulkops.errors import BadRequest, FileFormatError, ValidationError
from bulkops.formats import FileFormat, RawRow, read_header, read_rows
from bulkops.service.columns import suggest_column_map

PREVIEW_ROWS = 100
MAX_FILE_ERRORS = 20


@dataclass(slots=True)
class FileCheck:
    """What the check of a file found."""

    errors: list[str] = field(default_factory=list)
    suggested_column_map: dict[str, str] = field(default_factory=dict)


def _row_message(number: int, message: str) -> str:
    prefix = f"Row {number}"
    return message if message.startswith(prefix) else f"{prefix}: {message}"


def _row_id(definition: OperationDefinition, row: Row) -> str | None:
    if not definition.overrides_row_id:
        return None
    try:
        value = row.row_id()
    except Exception:  # a broken row_id() must not fail the check
        return None
    return None if value is None else str(value)


async def _row_error(
    definition: OperationDefinition,
    raw: RawRow,
    metadata: Metadata | None,
    scope: RowScope,
) -> str | None:
    if raw.error is not None or raw.values is None:
        return _row_message(raw.number, raw.error or "Row could not be read")
    try:
        row = convert(definition.row_model, raw.values)
    except ValidationError as exc:
        return _row_message(raw.number, str(exc))
    if metadata is None or not definition.overrides_validate_row:
        return None
    # current_row() in validate_row tells the row checked, under the placeholder
    # operation id (there is no operation yet), as validation's step in a first run.
    frame = (scope, raw.number, _row_id(definition, row), None, -1, 1, 0)
    token = row_frame.set(frame)
    try:
        await invoke(definition.instantiate().validate_row, row, metadata)
    except Exception as exc:
        return _row_message(raw.number, error_text(exc))
    finally:
        row_frame.reset(token)
    return None


def _file_columns(
    path: Path, fmt: FileFormat, delimiter: str | None, sheet: str | None
) -> list[str]:
    """The file's column names: the CSV or XLSX header, or the first JSON object's keys."""
    if fmt in (FileFormat.CSV, FileFormat.XLSX):
        return read_header(path, fmt, delimiter, sheet) or []
    for raw in read_rows(path, fmt, columns=(), keep_raw=True):
        return list(raw.raw or {}) if raw.error is None else []
    return []


async def check_file(
    definition: OperationDefinition,
    path: Path,
    fmt: FileFormat,
    metadata: Metadata | None,
    column_map: Mapping[str, str] | None = None,
    sheet: str | None = None,
    created_by: str = "anonymous",
) -> FileCheck:
    """File errors for a submission: format and header problems, no data rows, and the
    parse, conversion and row-validation failures of the first 100 rows (at most 20 errors,
    each prefixed with its row number). Row validation runs only with valid metadata. When
    the file's columns miss model columns that differ only in case or punctuation, a column
    map is suggested. An XLSX file is read from ``sheet`` (None: its first worksheet).
    ``bulkops.current_row()`` in ``validate_row`` tells the row checked, with the
    placeholder operation id ``UUID(int=0)`` and ``created_by`` (who asked).

    Raises:
        BadRequest: the workbook has no sheet named ``sheet`` (the message names its
            sheets); a workbook that cannot be read is a file error.
    """
    found = FileCheck()
    scope = RowScope(NO_OPERATION_ID, definition.name, created_by)
    delimiter = definition.controls.csv_delimiter
    seen = 0
    if fmt is FileFormat.XLSX:
        # Imported here: openpyxl is needed only when a workbook is read.
        from bulkops.formats.xlsx import UnknownSheet, check_sheet

        try:
            sheet = await asyncio.to_thread(check_sheet, path, sheet)
        except UnknownSheet as exc:
            raise BadRequest(str(exc), sheets=exc.names) from None
        except FileFormatError as exc:
            found.errors.append(str(exc))
            return found
    reader = read_rows(
        path,
        fmt,
        columns=definition.columns,
        required=definition.required_columns,
        drop_empty=fmt is FileFormat.CSV,
        column_map=column_map,
        delimiter=delimiter,
        sheet=sheet,
    )
    try:
        found.suggested_column_map = suggest_column_map(
            definition.columns, _file_columns(path, fmt, delimiter, sheet), column_map
        )
        for raw in reader:
            seen += 1
            message = await _row_error(definition, raw, metadata, scope)
            if message is not None:
                found.errors.append(message)
            if seen >= PREVIEW_ROWS or len(found.errors) >= MAX_FILE_ERRORS:
                break
    except FileFormatError as exc:
        found.errors.append(str(exc))
        found.errors = found.errors[:MAX_FILE_ERRORS]
        return found
    finally:
        reader.close()
    if seen == 0:
        found.errors.append("File contains no data rows")
    return found
