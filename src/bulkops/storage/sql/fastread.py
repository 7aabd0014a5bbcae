"""Reading row records from SQLite at driver level: the hot path of export, resume, retry.

SQLAlchemy's per-value result processing (enums, UUIDs, datetimes) cost more than the
query; row records are decoded here straight from driver tuples. The decoding must stay
identical to what the column types in ``types.py`` produce; ``tests/contract`` compares.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from bulkops.storage.records import (
    OperationRecord,
    RowRecord,
    StepState,
    WaitOutcome,
    resolve_wait,
)
from bulkops.storage.sql.bulk import sqlite_timestamp
from bulkops.storage.states import ErrorType, OperationStatus, RowState

ROW_COLUMNS = (
    "row_number, state, row_id, step_index, step_name, error_type, error_message, "
    "retry_attempt, signal_key, row_data, steps, waiting_since, completed_at"
)
_STATES = {state.value: state for state in RowState}
_ERRORS = {error.value: error for error in ErrorType}


def _timestamps() -> Callable[[str | None], datetime | None]:
    last: list[object] = [None, None]

    def parse(text: str | None) -> datetime | None:
        if text is None:
            return None
        if text != last[0]:  # rows of one batch mostly share timestamps
            last[0], last[1] = text, datetime.fromisoformat(text).replace(tzinfo=UTC)
        value = last[1]
        return value if isinstance(value, datetime) else None

    return parse


def row_decoder(operation_id: UUID) -> Callable[[Any], RowRecord]:
    """Decode driver tuples of ``ROW_COLUMNS`` into row records of one operation."""
    stamp = _timestamps()
    loads = json.loads

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
            row_data=None if data is None else loads(data),
            steps=[StepState.from_json(s) for s in loads(steps)] if steps else [],
            waiting_since=stamp(waiting),
            completed_at=stamp(completed),
        )

    return decode


def batch_reader(
    operation_id: UUID, after: int, limit: int, state: RowState | None
) -> Callable[[sqlite3.Connection], list[RowRecord]]:
    """A function for the SQLite reader thread: the next ``limit`` row records of the
    operation above row ``after`` (in ``state`` when given), by row number."""
    sql = f"SELECT {ROW_COLUMNS} FROM row_records WHERE operation_id = ? AND row_number > ?"
    params: tuple[object, ...] = (str(operation_id), after)
    if state is not None:
        sql += " AND state = ?"
        params += (state.value,)
    sql += " ORDER BY row_number LIMIT ?"
    params += (limit,)

    def read(connection: sqlite3.Connection) -> list[RowRecord]:
        decode = row_decoder(operation_id)
        return [decode(values) for values in connection.execute(sql, params)]

    return read


def waiting_finder(
    operation_id: UUID, key_prefix: str
) -> Callable[[sqlite3.Connection], RowRecord | None]:
    """For the reader thread: ``RowStore.find_waiting`` in one hop."""
    # The keys starting with the prefix form one range of the (operation_id, signal_key)
    # index: the prefix ends with ":", so they all sort below the prefix with ";" instead.
    # The row number closes the key, so a user key that is a prefix of another ("a" and
    # "a:b") never matches the other's rows.
    sql = (
        f"SELECT {ROW_COLUMNS} FROM row_records WHERE operation_id = ? "
        "AND signal_key >= ? AND signal_key < ? AND signal_key = ? || row_number AND state = ? "
        "ORDER BY waiting_since, row_number LIMIT 1"
    )
    params = (
        str(operation_id),
        key_prefix,
        key_prefix[:-1] + chr(ord(key_prefix[-1]) + 1) if key_prefix else "\U0010ffff",
        key_prefix,
        RowState.WAITING_FOR_COMPLETION.value,
    )

    def find(connection: sqlite3.Connection) -> RowRecord | None:
        found = connection.execute(sql, params).fetchone()
        return None if found is None else row_decoder(operation_id)(found)

    return find


def wait_resolver(
    operation_id: UUID, row_number: int, signal_key: str | None, outcome: WaitOutcome
) -> Callable[[sqlite3.Connection], RowRecord | None]:
    """For the writer thread: ``RowStore.resolve_wait`` in one hop (inside the caller's
    ``BEGIN IMMEDIATE``, so the read and the update cannot be split by another writer)."""
    key_clause = "signal_key IS NULL" if signal_key is None else "signal_key = ?"
    condition = f"operation_id = ? AND row_number = ? AND state = ? AND {key_clause}"
    params: tuple[object, ...] = (
        str(operation_id),
        row_number,
        RowState.WAITING_FOR_COMPLETION.value,
    ) + (() if signal_key is None else (signal_key,))
    select = f"SELECT {ROW_COLUMNS} FROM row_records WHERE {condition}"
    update = (
        "UPDATE row_records SET state = ?, step_index = ?, error_type = ?, error_message = ?, "
        f"completed_at = ?, steps = ? WHERE {condition}"
    )

    def resolve(connection: sqlite3.Connection) -> RowRecord | None:
        found = connection.execute(select, params).fetchone()
        if found is None:
            return None
        resolved = resolve_wait(row_decoder(operation_id)(found), outcome)
        steps = json.dumps([step.to_json() for step in resolved.steps]) if resolved.steps else None
        values = (
            resolved.state.value,
            resolved.step_index,
            None if resolved.error_type is None else resolved.error_type.value,
            resolved.error_message,
            sqlite_timestamp(resolved.completed_at),
            steps,
        )
        connection.execute(update, values + params)
        return resolved

    return resolve


_OPERATION_FIELDS = tuple(field.name for field in dataclasses.fields(OperationRecord))
_OPERATION_TIMESTAMPS = ("created_at", "started_at", "completed_at", "heartbeat_at")
_OPERATION_JSON = ("metadata", "notifications")
_OPERATION_SQL = f"SELECT {', '.join(_OPERATION_FIELDS)} FROM operations WHERE id = ?"


def operation_reader(operation_id: UUID) -> Callable[[sqlite3.Connection], OperationRecord | None]:
    """For the reader thread: ``OperationStore.get`` in one hop (status polls, leases)."""

    def read(connection: sqlite3.Connection) -> OperationRecord | None:
        found = connection.execute(_OPERATION_SQL, (str(operation_id),)).fetchone()
        if found is None:
            return None
        values: dict[str, Any] = dict(zip(_OPERATION_FIELDS, found, strict=True))
        values["id"] = operation_id
        values["status"] = OperationStatus(values["status"])
        for name in _OPERATION_TIMESTAMPS:
            text = values[name]
            values[name] = (
                None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC)
            )
        for name in _OPERATION_JSON:
            if values[name] is not None:
                values[name] = json.loads(values[name])
        return OperationRecord(**values)

    return read
