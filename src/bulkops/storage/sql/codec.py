"""Records to driver values and back: the one codec of row, operation and event records.

The column lists come from the table definitions in ``schema.py`` (whose column names equal
the record fields), so a column is named once. The hot paths (batch writes, batch reads)
bypass SQLAlchemy's per-value processing, which cost more than the database itself; the
values here must stay identical to what the column types in ``types.py`` produce, and
``tests/contract`` round-trips both.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import JSON, Boolean, RowMapping

from bulkops.storage.records import (
    ChunkRecord,
    CompletedSpan,
    EventRecord,
    OperationRecord,
    ReportValues,
    RowOutcome,
    RowRecord,
    StepState,
)
from bulkops.storage.sql.schema import events, operations, row_records
from bulkops.storage.sql.types import EnumText, UtcDateTime, UuidType
from bulkops.storage.states import ChunkState, ErrorType, RowState

ROW_COLUMNS: tuple[str, ...] = tuple(column.name for column in row_records.columns)
ROW_KEY = ("operation_id", "row_number")
# Everything but the operation id, in table order: what a batch read selects.
ROW_VALUE_COLUMNS = ROW_COLUMNS[1:]
OPERATION_COLUMNS: tuple[str, ...] = tuple(column.name for column in operations.columns)
EVENT_COLUMNS: tuple[str, ...] = tuple(
    column.name for column in events.columns if column.name != "sequence"
)

_STATES = {state.value: state for state in RowState}
_ERRORS = {error.value: error for error in ErrorType}
# How operation columns decode, read off their column types.
_OPERATION_TIMESTAMPS = tuple(c.name for c in operations.columns if isinstance(c.type, UtcDateTime))
_OPERATION_JSON = tuple(c.name for c in operations.columns if isinstance(c.type, JSON))
_OPERATION_ENUMS = {
    c.name: c.type.enum_type for c in operations.columns if isinstance(c.type, EnumText)
}
_OPERATION_UUIDS = tuple(
    c.name for c in operations.columns if isinstance(c.type, UuidType) and c.name != "id"
)
_OPERATION_BOOLEANS = tuple(c.name for c in operations.columns if isinstance(c.type, Boolean))

Timestamp = Callable[[datetime | None], Any]


def aware(value: datetime) -> datetime:
    """Refuse a naive datetime: its zone is unknowable."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}: bulkops stores aware UTC")
    return value


def sqlite_timestamp(value: datetime | None) -> str | None:
    """Naive UTC text in SQLAlchemy's SQLite DATETIME format (always with microseconds)."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = aware(value).astimezone(UTC)
    # "YYYY-MM-DD HH:MM:SS.ffffff" is the first 26 characters; the rest is "+00:00".
    return value.isoformat(sep=" ", timespec="microseconds")[:26]


def postgres_timestamp(value: datetime | None) -> datetime | None:
    """An aware datetime for psycopg."""
    return None if value is None else aware(value)


def _cached(timestamp: Timestamp) -> Timestamp:
    """``timestamp`` remembering its last answer: rows finished within the same tick share
    one datetime object, so most rows skip the encoding."""
    last: list[Any] = [None, None]

    def encode(value: datetime | None) -> Any:
        if value is None:
            return None
        if value is not last[0]:
            last[0], last[1] = value, timestamp(value)
        return last[1]

    return encode


def steps_json(steps: list[StepState]) -> str | None:
    """Steps as stored: NULL for row-based operations (no steps) rather than "[]"."""
    return json.dumps([step.to_json() for step in steps]) if steps else None


# What ending a wait changes in a row, and how those values are encoded.
WAIT_END_COLUMNS = ("state", "step_index", "error_type", "error_message", "completed_at", "steps")


def wait_end_values(row: RowRecord, timestamp: Timestamp) -> tuple[Any, ...]:
    """Driver values of ``WAIT_END_COLUMNS`` for a row whose wait just ended."""
    return (
        row.state.value,
        row.step_index,
        None if row.error_type is None else row.error_type.value,
        row.error_message,
        timestamp(row.completed_at),
        steps_json(row.steps),
    )


def row_encoder(operation_key: Any, timestamp: Timestamp) -> Callable[[RowRecord], tuple[Any, ...]]:
    """Encode row records of one operation into driver tuples in ``ROW_COLUMNS`` order.

    Args:
        operation_key: the operation id as the driver takes it (text on SQLite).
        timestamp: ``sqlite_timestamp`` or ``postgres_timestamp``.
    """
    dumps = json.dumps
    stamp = _cached(timestamp)

    def encode(row: RowRecord) -> tuple[Any, ...]:
        error_type = row.error_type
        return (
            operation_key,
            row.row_number,
            row.state.value,
            row.row_id,
            row.step_index,
            row.step_name,
            None if error_type is None else error_type.value,
            row.error_message,
            row.retry_attempt,
            row.signal_key,
            None if row.row_data is None else dumps(row.row_data),
            steps_json(row.steps),
            stamp(row.waiting_since),
            stamp(row.completed_at),
        )

    return encode


def sqlite_rows(operation_id: UUID, rows: Sequence[RowRecord]) -> list[tuple[Any, ...]]:
    """Driver tuples of ``rows`` in ``ROW_COLUMNS`` order for sqlite3."""
    encode = row_encoder(str(operation_id), sqlite_timestamp)
    return [encode(row) for row in rows]


def postgres_rows(operation_id: UUID, rows: Sequence[RowRecord]) -> list[tuple[Any, ...]]:
    """Driver tuples of ``rows`` in ``ROW_COLUMNS`` order for psycopg."""
    encode = row_encoder(operation_id, postgres_timestamp)
    return [encode(row) for row in rows]


def span_parameters(
    operation_key: Any, spans: Sequence[CompletedSpan], timestamp: Timestamp
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Parameters of ``bulk``'s span statements for each span: those that clear its rows'
    records, and those that store it.

    Args:
        operation_key: the operation id as the driver takes it (text on SQLite).
        timestamp: ``sqlite_timestamp`` or ``postgres_timestamp``.
    """
    clears = [(operation_key, first, last) for first, last, _, _, _ in spans]
    stored = [
        (operation_key, last, first, index, step, timestamp(at))
        for first, last, step, at, index in spans
    ]
    return clears, stored


def sqlite_events(events: Sequence[EventRecord]) -> list[tuple[Any, ...]]:
    """Driver tuples of events in ``EVENT_COLUMNS`` order for sqlite3."""
    return [
        (
            str(e.operation_id),
            e.operation_name,
            e.type.value,
            e.severity.value,
            e.message,
            sqlite_timestamp(e.timestamp),
            e.tenant,
            e.actor,
        )
        for e in events
    ]


def _parse_timestamps() -> Callable[[Any], datetime | None]:
    last: list[Any] = [None, None]

    def parse(value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, datetime):  # PostgreSQL hands back aware datetimes
            return value.astimezone(UTC)
        if value != last[0]:  # rows of one batch mostly share timestamps
            last[0], last[1] = value, datetime.fromisoformat(value).replace(tzinfo=UTC)
        parsed: datetime = last[1]
        return parsed

    return parse


def _json(value: Any) -> Any:
    # SQLite hands back JSON text; psycopg decodes jsonb itself.
    return json.loads(value) if isinstance(value, str) else value


def report_decoder() -> Callable[[Any], ReportValues]:
    """Decode driver tuples of ``REPORT_FIELDS`` into report values (the timestamp is the
    only value to convert)."""
    stamp = _parse_timestamps()

    def decode(values: Any) -> ReportValues:
        *first, completed_at = values
        return (*first, stamp(completed_at))

    return decode


def outcome_decoder() -> Callable[[Any], RowOutcome]:
    """Decode driver tuples of ``OUTCOME_FIELDS`` into row outcomes."""
    states = _STATES

    def decode(values: Any) -> RowOutcome:
        number, state_text, row_id, data, steps = values
        return RowOutcome(
            number,
            states[state_text],
            row_id,
            None if data is None else _json(data),
            [StepState.from_json(s) for s in _json(steps)] if steps else [],
        )

    return decode


def row_decoder(operation_id: UUID) -> Callable[[Any], RowRecord]:
    """Decode driver tuples of ``ROW_VALUE_COLUMNS`` into row records of one operation."""
    stamp = _parse_timestamps()

    def decode(values: Any) -> RowRecord:
        (
            number,
            state_text,
            row_id,
            step_index,
            step_name,
            error_text,
            message,
            attempt,
            key,
            data,
            steps,
            waiting,
            completed,
        ) = values
        return RowRecord(
            operation_id=operation_id,
            row_number=number,
            state=_STATES[state_text],
            row_id=row_id,
            step_index=step_index,
            step_name=step_name,
            error_type=None if error_text is None else _ERRORS[error_text],
            error_message=message,
            retry_attempt=attempt,
            signal_key=key,
            row_data=None if data is None else _json(data),
            steps=[StepState.from_json(s) for s in _json(steps)] if steps else [],
            waiting_since=stamp(waiting),
            completed_at=stamp(completed),
        )

    return decode


# The columns of ``chunks`` in the order ``decode_chunk`` reads them.
CHUNK_COLUMNS = (
    "operation_id",
    "chunk_index",
    "first_row",
    "row_count",
    "byte_offset",
    "state",
    "worker_id",
    "heartbeat_at",
    "version",
    "resume_count",
)


def decode_chunk(values: Any) -> ChunkRecord:
    """A chunk record from driver or column-typed values in ``CHUNK_COLUMNS`` order."""
    operation_id, index, first, count, offset, state, worker, heartbeat, version, resumes = values
    return ChunkRecord(
        operation_id=operation_id if isinstance(operation_id, UUID) else UUID(operation_id),
        index=index,
        first_row=first,
        row_count=count,
        offset=offset,
        state=ChunkState(state),
        worker_id=worker,
        heartbeat_at=_parse_timestamps()(heartbeat),
        version=version,
        resume_count=resumes,
    )


def decode_operation(values: Any) -> OperationRecord:
    """An operation record from driver values in ``OPERATION_COLUMNS`` order."""
    fields: dict[str, Any] = dict(zip(OPERATION_COLUMNS, values, strict=True))
    fields["id"] = fields["id"] if isinstance(fields["id"], UUID) else UUID(fields["id"])
    for name, kind in _OPERATION_ENUMS.items():
        fields[name] = kind(fields[name])
    stamp = _parse_timestamps()
    for name in _OPERATION_TIMESTAMPS:
        fields[name] = stamp(fields[name])
    for name in _OPERATION_JSON:
        if fields[name] is not None:
            fields[name] = _json(fields[name])
    for name in _OPERATION_UUIDS:  # SQLite hands back text
        value = fields[name]
        if value is not None and not isinstance(value, UUID):
            fields[name] = UUID(value)
    for name in _OPERATION_BOOLEANS:  # SQLite hands back 0 and 1
        fields[name] = bool(fields[name])
    return OperationRecord(**fields)


def row_from_mapping(row: RowMapping) -> RowRecord:
    """The row record stored in a ``row_records`` row (read through the column types)."""
    values = {name: row[name] for name in row.keys()}
    steps = values.pop("steps")
    return RowRecord(**values, steps=[StepState.from_json(step) for step in steps] if steps else [])


def operation_from_row(row: RowMapping) -> OperationRecord:
    """The record stored in an ``operations`` row read through the column types."""
    return OperationRecord(**{name: row[name] for name in OPERATION_COLUMNS})


def event_values(event: EventRecord) -> dict[str, Any]:
    """Column values of an event (the database assigns its sequence)."""
    return {name: getattr(event, name) for name in EVENT_COLUMNS}


def operation_values(record: OperationRecord) -> dict[str, Any]:
    """Column values of an operation record."""
    return {name: getattr(record, name) for name in OPERATION_COLUMNS}


def check_records_match_tables() -> None:
    """Raise when a record's fields and its table's columns differ (tests call this)."""
    pairs = (
        (RowRecord, ROW_COLUMNS),
        (OperationRecord, OPERATION_COLUMNS),
        (EventRecord, (*EVENT_COLUMNS, "sequence")),
    )
    for record, columns in pairs:
        names = {field.name for field in dataclasses.fields(record)}
        if names != set(columns):
            raise AssertionError(f"{record.__name__} fields {names} != columns {set(columns)}")
