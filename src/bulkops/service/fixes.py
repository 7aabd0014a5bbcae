"""Fixing a failed row in place: its new data, validated at once, kept for the next retry
and for operations created from this one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pydantic

from bulkops.clock import utcnow
from bulkops.definition.conversion import convert, error_lines
from bulkops.definition.models import Row
from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.definition.row_context import RowScope, row_frame
from bulkops.engine.invoke import error_text, invoke
from bulkops.engine.resume import CELL_FORMATS, RowData
from bulkops.errors import Conflict, NotFound, Unprocessable, ValidationError
from bulkops.formats import FileFormat
from bulkops.formats.base import RAW_EXTRA_KEY, RAW_LINE_KEY, RAW_VALUE_KEY
from bulkops.service.export import DATA_COLUMNS, FIXED_COLUMN
from bulkops.storage import lifecycle
from bulkops.storage.ports import OperationStore, RowStore
from bulkops.storage.records import OperationRecord, RowRecord
from bulkops.storage.states import RowState
from bulkops.wire import unescape_formula

INVALID_DATA = "The row's new data is invalid; nothing was changed"
_RAW_KEYS = frozenset({RAW_EXTRA_KEY, RAW_LINE_KEY, RAW_VALUE_KEY})
# The outcome columns a data export adds: a row of such an export sent back as a fix keeps
# its file columns only.
EXPORT_COLUMNS = frozenset({*DATA_COLUMNS, FIXED_COLUMN})


@dataclass(frozen=True, slots=True)
class FixOutcome:
    """What a fix did: the row as it now is, whether its data is a fix, and whether the
    new data was the row's data already (then nothing changed)."""

    row: RowRecord
    fixed: bool
    unchanged: bool = False


class FixService:
    """``PATCH /api/bulks/{id}/rows/{rowNumber}``: replace a failed row's data."""

    def __init__(
        self,
        registry: Registry,
        operations: OperationStore,
        rows: RowStore,
        *,
        escape_formulas: bool = True,
    ) -> None:
        self._registry = registry
        self._operations = operations
        self._rows = rows
        # A row of a CSV data export carries the ``'`` the export put before formula-like
        # cells; sent back as a fix, that ``'`` goes again (when the exports add it).
        self._unescape = escape_formulas

    async def fix(
        self,
        operation_id: UUID,
        row_number: int,
        row_data: dict[str, Any],
        *,
        actor: str = "system",
    ) -> FixOutcome:
        """Validate ``row_data`` (the row's file columns by their file names, the whole row)
        as the engine would (row model and ``validate_row``) and, when it passes, make it
        the row's data and mark the row fixed. The row stays Failed with its error until a
        retry runs it again. The outcome columns of a data export (``_rowNumber`` and the
        like) are left out, so a row of such an export can be sent back as it is.

        Data equal to the row's current data changes nothing (no fix is recorded, ``fixed``
        stays as it was, no event): the outcome says ``unchanged``. A data export sent back
        whole thus marks only the rows someone edited.

        Raises:
            NotFound: unknown operation or row.
            Conflict: the operation does not keep row data, has not finished, or the row
                did not fail (carries the reason).
            Unprocessable: unknown or missing columns, or data that fails validation
                (``errors``: one message each); nothing changed.
        """
        record = await self._operations.get(operation_id)
        if record is None:
            raise NotFound(f"Operation {operation_id} not found")
        definition = self._definition(record)
        row_data = _own_columns(row_data, unescape=self._unescape)
        row = await self._rows.get_row(operation_id, row_number)
        if row is None:
            raise NotFound(f"Row {row_number} of operation {operation_id} not found")
        if row.state is not RowState.FAILED:
            raise _conflict(f"Row {row_number} is {row.state.value}; only Failed rows can be fixed")
        if same_data(row_data, row.row_data):
            known = await self._rows.fixes(operation_id, row_numbers=[row_number])
            return FixOutcome(row, fixed=row_number in known, unchanged=True)
        errors = _column_errors(definition, record, row, row_data)
        if not errors:
            errors = await self._validate(
                definition, record, row_number, row_data, row.retry_attempt
            )
        if errors:
            raise Unprocessable(INVALID_DATA, errors=errors)
        now = utcnow()
        before = {k: v for k, v in (row.row_data or {}).items() if k not in _RAW_KEYS}
        columns = lifecycle.changed_columns(before, row_data)
        event = lifecycle.row_fixed_event(record, row_number, columns, now, actor)
        fixed = await self._rows.fix_row(operation_id, row_number, row_data, now, [event])
        if fixed is None:  # retried or otherwise moved on since it was read
            raise _conflict(f"Row {row_number} changed meanwhile and is no longer Failed")
        return FixOutcome(fixed, fixed=True)

    def _definition(self, record: OperationRecord) -> OperationDefinition:
        definition = self._registry.get(record.operation_name)
        if definition is None:
            raise _conflict(f"Operation {record.operation_name!r} is not registered here")
        if not definition.track_row_data:
            raise _conflict(
                f"Operation {definition.name!r} does not keep row data (TrackRowData is off), "
                "so its rows cannot be fixed"
            )
        if not record.status.is_terminal:
            raise _conflict(
                f"Operation is {record.status.value}; rows can be fixed once it has finished"
            )
        return definition

    async def _validate(
        self,
        definition: OperationDefinition,
        record: OperationRecord,
        row_number: int,
        row_data: dict[str, Any],
        retry_attempt: int,
    ) -> list[str]:
        cells = FileFormat(record.file_format) in CELL_FORMATS
        data = RowData(definition, drop_empty=cells, column_map=record.column_map)
        raw = data.raw(row_number, row_data)
        try:
            row = definition.row_model.model_validate(raw.values)
        except pydantic.ValidationError as exc:
            return error_lines(exc)
        if not definition.overrides_validate_row:
            return []
        try:  # stored as the model validated them at create
            metadata = convert(definition.metadata_model, record.metadata)
        except ValidationError as exc:
            raise _conflict(f"The operation's metadata are invalid: {exc}") from None
        instance = definition.instantiate()
        # current_row() in validate_row tells this row, as when the engine validates it.
        scope = RowScope(record.id, definition.name, record.created_by)
        row_id = _row_id(row)
        token = row_frame.set((scope, row_number, row_id, None, -1, 1, retry_attempt))
        try:
            await invoke(instance.validate_row, row, metadata)
        except ValidationError as exc:
            return [str(exc)]
        except Exception as exc:
            return [error_text(exc)]
        finally:
            row_frame.reset(token)
        return []


def _own_columns(row_data: dict[str, Any], *, unescape: bool) -> dict[str, Any]:
    """The row's file columns: a row of a data export (it has an outcome column such as
    ``_rowNumber``) loses those columns and, with ``unescape``, the ``'`` the CSV export
    put before formula-like cells, so the export sent back changes nothing."""
    if not any(key in EXPORT_COLUMNS for key in row_data):
        return row_data
    if not unescape:
        return {k: v for k, v in row_data.items() if k not in EXPORT_COLUMNS}
    return {
        unescape_formula(k): unescape_formula(v)
        for k, v in row_data.items()
        if k not in EXPORT_COLUMNS
    }


def _row_id(row: Row) -> str | None:
    try:
        value = row.row_id()
    except Exception:  # a broken row_id() must not fail the fix
        return None
    return None if value is None else str(value)


def same_data(new: dict[str, Any], current: dict[str, Any] | None) -> bool:
    """Whether ``new`` holds the data the row holds already: the same columns (names in any
    case) with the same values, a value and its text alike (a CSV export writes ``41`` for
    the number 41) and a missing cell like an empty one."""
    if current is None:
        return False
    mine = {_fold(k): v for k, v in current.items() if k not in _RAW_KEYS}
    theirs = {_fold(k): v for k, v in new.items()}
    return all(_cell(mine.get(key)) == _cell(theirs.get(key)) for key in mine.keys() | theirs)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value).strip()
    return value


def _conflict(reason: str) -> Conflict:
    return Conflict(f"Cannot fix the row: {reason}", reason=reason)


def _fold(name: str) -> str:
    return name.strip().casefold()


def _column_errors(
    definition: OperationDefinition,
    record: OperationRecord,
    row: RowRecord,
    row_data: dict[str, Any],
) -> list[str]:
    """Columns the new data names that the row cannot have, and required ones it lacks.

    A row's columns are the model's, by their file names (through the operation's column
    map), and any other column its file had (kept in its data, ignored by the model).
    """
    file_name = {model: file for file, model in (record.column_map or {}).items()}
    known = {_fold(file_name.get(column, column)) for column in definition.columns}
    known.update(_fold(key) for key in (row.row_data or {}) if key not in _RAW_KEYS)
    given = {_fold(key) for key in row_data}
    errors = [f"{key}: unknown column" for key in row_data if _fold(key) not in known]
    for column in definition.required_columns:
        name = file_name.get(column, column)
        if _fold(name) not in given:
            errors.append(f"{name}: required column missing")
    return errors
