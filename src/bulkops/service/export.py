"""Export of an operation's row records as CSV, JSON, JSON Lines or XLSX, streamed in
chunks."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar
from uuid import UUID

from bulkops.definition.registry import Registry
from bulkops.errors import BadRequest, Conflict, NotFound
from bulkops.formats.base import (
    RAW_EXTRA_KEY,
    RAW_LINE_KEY,
    RAW_VALUE_KEY,
    XLSX_MEDIA_TYPE,
    match_columns,
)
from bulkops.formats.workbook import WorkbookStream
from bulkops.storage.ports import OperationStore, RowStore
from bulkops.storage.records import ReportValues, RowRecord
from bulkops.storage.states import ErrorType, RowState
from bulkops.wire import escape_cells

# Row records fetched per storage round trip, and rows scanned between two chunks (a
# report's rows come in batches of as many).
BATCH_SIZE = 1000
FLUSH_ROWS = 500

REPORT_COLUMNS = (
    "rowNumber",
    "rowId",
    "state",
    "stepIndex",
    "stepName",
    "errorType",
    "errorMessage",
    "retryAttempt",
    "completedAt",
)

# Appended to the report columns when some row of the operation was fixed in place
# (``PATCH /api/bulks/{id}/rows/{n}``): true for those rows, as ``fixed`` in /errors items.
REPORT_FIXED_COLUMN = "fixed"

# Appended to the original columns in data mode. On re-upload they are extra columns,
# which the row model ignores.
DATA_COLUMNS = ("_rowNumber", "_state", "_errorType", "_errorMessage")
# Appended after them when some row of the operation was fixed in place: true for those rows.
FIXED_COLUMN = "_fixed"

# Keys the readers put into row data for content without a column of their own. They never
# become CSV columns (see ``_DataCsv``); JSON and JSON Lines keep them.
RAW_KEYS = frozenset({RAW_EXTRA_KEY, RAW_LINE_KEY, RAW_VALUE_KEY})

E = TypeVar("E", bound=StrEnum)
T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class ExportMode(StrEnum):
    """What an export holds."""

    REPORT = "report"  # one line per row record: state, step, error
    DATA = "data"  # the original columns plus the outcome, for fixing and re-uploading


class ExportFormat(StrEnum):
    """The file format of an export (the value is also the file extension)."""

    CSV = "csv"
    JSON = "json"
    JSONL = "jsonl"
    XLSX = "xlsx"


MEDIA_TYPES = {
    ExportFormat.CSV: "text/csv; charset=utf-8",
    ExportFormat.JSON: "application/json",
    ExportFormat.JSONL: "application/x-ndjson",
    ExportFormat.XLSX: XLSX_MEDIA_TYPE,
}


@dataclass(frozen=True, slots=True)
class Export:
    """A validated export, ready to stream.

    Attributes:
        file_name: The download name, ``operation-{id}-{mode}.{ext}``.
        media_type: The content type of the bytes.
        chunks: The encoded file, a few hundred rows per chunk. Consume it once.
    """

    file_name: str
    media_type: str
    chunks: AsyncIterator[bytes]


@dataclass(frozen=True, slots=True)
class RowFilter:
    """Which row records an export keeps; None matches everything."""

    state: RowState | None = None
    error_type: ErrorType | None = None
    step_name: str | None = None

    @classmethod
    def parse(cls, state: str | None, error_type: str | None, step_name: str | None) -> RowFilter:
        """Build from request text: state and error type case-insensitive, unknown ones
        ignored; the step name exact, empty ignored."""
        return cls(
            state=RowState.parse(state) if state else None,
            error_type=ErrorType.parse(error_type) if error_type else None,
            step_name=step_name or None,
        )

    @property
    def states(self) -> tuple[RowState] | None:
        """The states to ask the store for (it then reads only matching rows)."""
        return None if self.state is None else (self.state,)

    def matches(self, row: RowRecord) -> bool:
        """True when the row passes every filter that is set."""
        return (
            (self.state is None or row.state is self.state)
            and (self.error_type is None or row.error_type is self.error_type)
            and (self.step_name is None or row.step_name == self.step_name)
        )

    def matches_report(self, values: ReportValues) -> bool:
        """``matches`` for a row's report values."""
        return (
            (self.state is None or values[2] == self.state.value)
            and (self.error_type is None or values[5] == self.error_type.value)
            and (self.step_name is None or values[4] == self.step_name)
        )


class ExportService:
    """Streams the row records of an operation as a report or as re-uploadable data."""

    def __init__(
        self,
        operations: OperationStore,
        rows: RowStore,
        registry: Registry,
        *,
        escape_formulas: bool = True,
    ) -> None:
        self._operations = operations
        self._rows = rows
        self._registry = registry
        # CSV cells a spreadsheet would run as formulas get a leading ``'``
        # (``bulkops.wire.escape_formula``); XLSX cells are text, never formulas.
        self._escape = escape_formulas

    async def export(
        self,
        operation_id: UUID,
        *,
        mode: str | None = None,
        file_format: str | None = None,
        state: str | None = None,
        error_type: str | None = None,
        step_name: str | None = None,
    ) -> Export:
        """Check an export request and return its stream; nothing is read before iterating.

        Args:
            operation_id: The operation whose rows are exported.
            mode: ``report`` (default) or ``data``, any case.
            file_format: ``csv`` (default), ``json``, ``jsonl`` or ``xlsx``, any case.
            state: Keep rows in this state (case-insensitive; unknown names are ignored).
            error_type: Keep rows with this error type (case-insensitive; unknown ignored).
            step_name: Keep rows whose current step has exactly this name.

        Returns:
            The file name, media type and chunk stream of the export.

        Raises:
            BadRequest: ``mode`` or ``file_format`` is not a known value.
            NotFound: The operation does not exist.
            Conflict: Data mode for an operation that does not keep row data (or is no
                longer registered).
        """
        export_mode = _choice(ExportMode, mode, ExportMode.REPORT, "mode")
        export_format = _choice(ExportFormat, file_format, ExportFormat.CSV, "format")
        record = await self._operations.get(operation_id)
        if record is None:
            raise NotFound(f"Operation {operation_id} not found")
        keep = RowFilter.parse(state, error_type, step_name)
        chunks: AsyncIterator[bytes]
        if export_mode is ExportMode.REPORT:
            # Fixed rows are few (one PATCH each): their numbers are read once, up front.
            fixed = frozenset(await self._rows.fixes(operation_id))
            chunks = self._report(
                operation_id, keep, _report_encoder(export_format, fixed, self._escape)
            )
        else:
            definition = self._registry.get(record.operation_name)
            if definition is None or not definition.track_row_data:
                raise Conflict(
                    "Export in data mode needs TrackRowData: "
                    f"operation '{record.operation_name}' does not keep row data"
                )
            fixed = frozenset(await self._rows.fixes(operation_id))
            encoder = _data_encoder(export_format, definition.columns, fixed, self._escape)
            chunks = self._data(operation_id, keep, encoder)
        return Export(
            file_name=f"operation-{record.id}-{export_mode.value}.{export_format.value}",
            media_type=MEDIA_TYPES[export_format],
            chunks=chunks,
        )

    def _report(
        self, operation_id: UUID, keep: RowFilter, encoder: _Encoder[ReportValues]
    ) -> AsyncIterator[bytes]:
        """The report, from the rows' report values, without building a record per
        row (which would cost most of a large export's time)."""
        batches = self._rows.report_batches(operation_id, batch_size=FLUSH_ROWS, states=keep.states)
        return _encoded(batches, keep.matches_report, encoder)

    def _data(
        self, operation_id: UUID, keep: RowFilter, encoder: _Encoder[RowRecord]
    ) -> AsyncIterator[bytes]:
        rows = self._rows.iterate(operation_id, batch_size=BATCH_SIZE, states=keep.states)
        return _encoded(_batched(rows, FLUSH_ROWS), keep.matches, encoder)


async def _encoded(
    batches: AsyncIterator[list[T]], keep: Callable[[T], bool], encoder: _Encoder[T]
) -> AsyncIterator[bytes]:
    """The encoded rows that ``keep`` keeps, a chunk per batch (none when empty)."""
    try:
        async for batch in batches:
            for row in batch:
                if keep(row):
                    encoder.write(row)
            chunk = encoder.take()
            if chunk:
                yield chunk if isinstance(chunk, bytes) else chunk.encode()
    finally:
        await _close(batches)  # now, when the client goes away mid-download
    encoder.finish()
    chunk = encoder.take()
    if chunk:
        yield chunk if isinstance(chunk, bytes) else chunk.encode()


async def _batched(rows: AsyncIterator[T], size: int) -> AsyncIterator[list[T]]:
    batch: list[T] = []
    try:
        async for row in rows:
            batch.append(row)
            if len(batch) == size:
                yield batch
                batch = []
    finally:
        await _close(rows)
    if batch:
        yield batch


async def _close(iterator: AsyncIterator[Any]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


def _choice(kind: type[E], text: str | None, default: E, name: str) -> E:
    if text is None:
        return default
    folded = text.strip().casefold()
    for value in kind:
        if value.value == folded:
            return value
    allowed = ", ".join(v.value for v in kind)
    raise BadRequest(f"Invalid {name} '{text}': expected one of {allowed}")


# --- values -----------------------------------------------------------------------------


def timestamp_text() -> Callable[[datetime | None], str | None]:
    """A formatter of ISO 8601 UTC times with ``Z`` (stores hand out aware UTC; naive
    counts as UTC). Rows finished in the same millisecond share one datetime object, so
    each formatter keeps the text of the last one it formatted."""
    last: list[Any] = [None, None]

    def text_of(moment: datetime | None) -> str | None:
        if moment is None:
            return None
        if moment is not last[0]:
            utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
            last[0], last[1] = moment, utc.isoformat().replace("+00:00", "Z")
        text: str = last[1]
        return text

    return text_of


def _cell(value: Any) -> Any:
    """A CSV cell of a row data value: text, null and numbers as the csv module writes
    them (null empty), booleans, objects and arrays as JSON text."""
    if value is None or isinstance(value, str) or type(value) in (int, float):
        return value
    return json.dumps(value, ensure_ascii=False)


def _to_json(item: dict[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def _report_items(fixed: frozenset[int]) -> Callable[[ReportValues], dict[str, Any]]:
    """A mapper of report values to JSON objects (null properties omitted; a row fixed in
    place, in ``fixed``, has ``REPORT_FIXED_COLUMN`` true)."""
    stamp = timestamp_text()

    def item(values: ReportValues) -> dict[str, Any]:
        cells = (*values[:-1], stamp(values[-1]))
        pairs = zip(REPORT_COLUMNS, cells, strict=True)
        found = {name: value for name, value in pairs if value is not None}
        if values[0] in fixed:
            found[REPORT_FIXED_COLUMN] = True
        return found

    return item


def _outcome(row: RowRecord) -> tuple[Any, ...]:
    """The ``DATA_COLUMNS`` values of a row."""
    return (
        row.row_number,
        row.state.value,
        row.error_type.value if row.error_type else None,
        row.error_message,
    )


def _data_items(fixed: frozenset[int]) -> Callable[[RowRecord], dict[str, Any]]:
    """A data row as a JSON object.

    The row data comes out verbatim (its own keys, values and nulls, including the raw
    keys of unparsable records) so nothing a user could fix is lost. The outcome follows
    under ``DATA_COLUMNS``, replacing keys of the same name left by an earlier export;
    null outcome properties are omitted; a row fixed in place (in ``fixed``) has
    ``FIXED_COLUMN`` true.
    """

    def item(row: RowRecord) -> dict[str, Any]:
        data = row.row_data or {}
        found = {k: v for k, v in data.items() if k not in DATA_COLUMNS and k != FIXED_COLUMN}
        for name, value in zip(DATA_COLUMNS, _outcome(row), strict=True):
            if value is not None:
                found[name] = value
        if row.row_number in fixed:
            found[FIXED_COLUMN] = True
        return found

    return item


# --- encoders ---------------------------------------------------------------------------


class _Encoder(Protocol[T_contra]):
    """Turns rows (records, or their report values) into text, buffering it until
    ``take``."""

    def write(self, row: T_contra) -> None: ...

    def finish(self) -> None: ...

    def take(self) -> str | bytes: ...


class _CsvBuffer:
    def __init__(self, escape: bool = True) -> None:
        self._buffer = io.StringIO()
        # The default dialect: comma, minimal quoting, CRLF line ends (as the template).
        self._writer = csv.writer(self._buffer)
        self._escape = escape

    def writerow(self, cells: Sequence[Any]) -> None:
        # Every cell, header included: a spreadsheet runs a formula wherever it is.
        self._writer.writerow(escape_cells(cells) if self._escape else cells)

    def take(self) -> str | bytes:
        text = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        return text


class _ReportCsv(_CsvBuffer):
    def __init__(self, fixed: frozenset[int] = frozenset(), escape: bool = True) -> None:
        super().__init__(escape)
        self._stamp = timestamp_text()
        self._fixed = fixed
        # The fixed flag is a column only when some row was fixed: others keep their header.
        self.writerow((*REPORT_COLUMNS, REPORT_FIXED_COLUMN) if fixed else REPORT_COLUMNS)

    def write(self, row: ReportValues) -> None:
        # Report values are text, whole numbers or null: the csv module writes them as is.
        if self._fixed:
            flag = "true" if row[0] in self._fixed else None
            self.writerow((*row[:-1], self._stamp(row[-1]), flag))
        else:
            self.writerow((*row[:-1], self._stamp(row[-1])))

    def finish(self) -> None:
        pass


class _DataCsv(_CsvBuffer):
    """Data mode as CSV.

    A stream cannot go back to widen its header, so the header is fixed when the first
    exported row arrives: the model's columns, then that row's other keys, then
    ``DATA_COLUMNS``. Extra keys keep the order the store returns them in: the file's,
    except on PostgreSQL, whose JSONB keeps keys in its own fixed order. Row data keys are
    matched to model columns as the readers do (exact, else case-insensitively), so a file
    headed ``Name`` fills ``name``. Keys first seen in later rows are dropped (JSON and
    JSON Lines keep them). The readers' raw keys (``_extra``, ``_line``, ``_value``) never
    become columns: they are not values of any column, and a header that depended on
    whether the first row was unparsable would not be stable. Such a row exports with the
    model columns it has (an over-long CSV record keeps its first fields) or empty ones;
    use JSON to see its raw text.
    """

    def __init__(
        self, columns: Sequence[str], fixed: frozenset[int] = frozenset(), escape: bool = True
    ) -> None:
        super().__init__(escape)
        self._columns = tuple(columns)
        self._fixed = fixed
        # The fixed flag is a column only when some row was fixed: others keep their header.
        self._outcomes = (*DATA_COLUMNS, FIXED_COLUMN) if fixed else DATA_COLUMNS
        self._extras: tuple[str, ...] | None = None
        self._positions: tuple[tuple[str, ...], list[int | None]] = ((), [])

    def _start(self, first: dict[str, Any]) -> None:
        keys = list(first)
        matched = set(match_columns(keys, self._columns).values())
        self._extras = tuple(
            key
            for i, key in enumerate(keys)
            if i not in matched
            and key not in RAW_KEYS
            and key not in DATA_COLUMNS
            and key != FIXED_COLUMN
        )
        self.writerow([*self._columns, *self._extras, *self._outcomes])

    def _model_values(self, data: dict[str, Any]) -> list[Any]:
        keys = tuple(data)
        if keys != self._positions[0]:
            # Rows of one file share their keys, so the matching is computed once per file.
            found = match_columns(keys, self._columns)
            self._positions = (keys, [found.get(col) for col in self._columns])
        values = list(data.values())
        return [None if i is None else values[i] for i in self._positions[1]]

    def write(self, row: RowRecord) -> None:
        data = row.row_data or {}
        if self._extras is None:
            self._start(data)
        extras = self._extras or ()
        cells = [*self._model_values(data), *(data.get(key) for key in extras), *_outcome(row)]
        if self._fixed:
            cells.append("true" if row.row_number in self._fixed else None)
        self.writerow([_cell(v) for v in cells])

    def finish(self) -> None:
        if self._extras is None:
            self._start({})


class _JsonArray(Generic[T]):
    """``[`` then comma-separated objects, one a line, then ``]``."""

    def __init__(self, item: Callable[[T], dict[str, Any]]) -> None:
        self._item = item
        self._parts: list[str] = ["["]
        self._first = True

    def write(self, row: T) -> None:
        self._parts.append(("\n" if self._first else ",\n") + _to_json(self._item(row)))
        self._first = False

    def finish(self) -> None:
        self._parts.append("]\n" if self._first else "\n]\n")

    def take(self) -> str:
        text = "".join(self._parts)
        self._parts.clear()
        return text


class _JsonLines(Generic[T]):
    """One object a line."""

    def __init__(self, item: Callable[[T], dict[str, Any]]) -> None:
        self._item = item
        self._parts: list[str] = []

    def write(self, row: T) -> None:
        self._parts.append(_to_json(self._item(row)) + "\n")

    def finish(self) -> None:
        pass

    def take(self) -> str:
        text = "".join(self._parts)
        self._parts.clear()
        return text


class _XlsxRows:
    """The rows of a CSV encoder written as an XLSX worksheet instead (mixed in before
    it): the same header and cells, typed numbers and booleans."""

    def __init__(self, *args: Any) -> None:
        self._book = WorkbookStream("Rows")
        super().__init__(*args)

    def writerow(self, cells: Sequence[Any]) -> None:
        self._book.row(cells)

    def finish(self) -> None:
        super().finish()  # type: ignore[misc]
        self._book.finish()

    def take(self) -> bytes:
        return self._book.take()


class _ReportXlsx(_XlsxRows, _ReportCsv):
    pass


class _DataXlsx(_XlsxRows, _DataCsv):
    pass


def _report_encoder(
    file_format: ExportFormat, fixed: frozenset[int] = frozenset(), escape: bool = True
) -> _Encoder[ReportValues]:
    if file_format is ExportFormat.XLSX:
        return _ReportXlsx(fixed)
    if file_format is ExportFormat.CSV:
        return _ReportCsv(fixed, escape)
    if file_format is ExportFormat.JSON:
        return _JsonArray(_report_items(fixed))
    return _JsonLines(_report_items(fixed))


def _data_encoder(
    file_format: ExportFormat,
    columns: Sequence[str],
    fixed: frozenset[int] = frozenset(),
    escape: bool = True,
) -> _Encoder[RowRecord]:
    if file_format is ExportFormat.XLSX:
        return _DataXlsx(columns, fixed)
    if file_format is ExportFormat.CSV:
        return _DataCsv(columns, fixed, escape)
    if file_format is ExportFormat.JSON:
        return _JsonArray(_data_items(fixed))
    return _JsonLines(_data_items(fixed))
