"""Checking a file before it is submitted: header, first rows, row validation."""

from __future__ import annotations

from pathlib import Path

from bulkops.definition.conversion import convert
from bulkops.definition.models import Metadata
from bulkops.definition.operation import OperationDefinition
from bulkops.engine.invoke import error_text, invoke
from bulkops.errors import FileFormatError, ValidationError
from bulkops.formats import FileFormat, RawRow, read_rows

PREVIEW_ROWS = 100
MAX_FILE_ERRORS = 20


def _row_message(number: int, message: str) -> str:
    prefix = f"Row {number}"
    return message if message.startswith(prefix) else f"{prefix}: {message}"


async def _row_error(
    definition: OperationDefinition,
    raw: RawRow,
    metadata: Metadata | None,
) -> str | None:
    if raw.error is not None or raw.values is None:
        return _row_message(raw.number, raw.error or "Row could not be read")
    try:
        row = convert(definition.row_model, raw.values)
    except ValidationError as exc:
        return _row_message(raw.number, str(exc))
    if metadata is None or not definition.overrides_validate_row:
        return None
    try:
        await invoke(definition.instantiate().validate_row, row, metadata)
    except Exception as exc:
        return _row_message(raw.number, error_text(exc))
    return None


async def check_file(
    definition: OperationDefinition,
    path: Path,
    fmt: FileFormat,
    metadata: Metadata | None,
) -> list[str]:
    """File errors for a submission: format and header problems, no data rows, and the
    parse, conversion and row-validation failures of the first 100 rows (at most 20 errors,
    each prefixed with its row number). Row validation runs only with valid metadata."""
    errors: list[str] = []
    seen = 0
    reader = read_rows(
        path,
        fmt,
        columns=definition.columns,
        required=definition.required_columns,
        drop_empty=fmt is FileFormat.CSV,
    )
    try:
        for raw in reader:
            seen += 1
            message = await _row_error(definition, raw, metadata)
            if message is not None:
                errors.append(message)
            if seen >= PREVIEW_ROWS or len(errors) >= MAX_FILE_ERRORS:
                break
    except FileFormatError as exc:
        errors.append(str(exc))
        return errors[:MAX_FILE_ERRORS]
    finally:
        reader.close()
    if seen == 0:
        errors.append("File contains no data rows")
    return errors
