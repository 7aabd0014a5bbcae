"""Reading row records from SQLite at driver level: the hot path of export, resume, retry.

SQLAlchemy's per-value result processing (enums, UUIDs, datetimes) cost more than the
query; row records are decoded here straight from driver tuples. The decoding must stay
identical to what the column types in ``types.py`` produce; ``tests/contract`` compares.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID

from bulkops.storage.records import RowRecord, StepState
from bulkops.storage.states import ErrorType, RowState

_COLUMNS = (
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


def batch_reader(
    operation_id: UUID, after: int, limit: int, state: RowState | None
) -> Callable[[sqlite3.Connection], list[RowRecord]]:
    """A function for the SQLite reader thread: the next ``limit`` row records of the
    operation above row ``after`` (in ``state`` when given), by row number."""
    sql = f"SELECT {_COLUMNS} FROM row_records WHERE operation_id = ? AND row_number > ?"
    params: tuple[object, ...] = (str(operation_id), after)
    if state is not None:
        sql += " AND state = ?"
        params += (state.value,)
    sql += " ORDER BY row_number LIMIT ?"
    params += (limit,)

    def read(connection: sqlite3.Connection) -> list[RowRecord]:
        stamp = _timestamps()
        loads = json.loads
        records = []
        for (
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
        ) in connection.execute(sql, params):
            records.append(
                RowRecord(
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
            )
        return records

    return read
