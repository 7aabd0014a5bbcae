"""The row upsert of ``save()`` at driver level: the hot path of a bulk operation.

SQLAlchemy's per-value bind processing cost more than SQLite itself spent inserting (about
half of save()'s time for 1,000-row batches), so rows are encoded here straight into
driver tuples and sent with one ``executemany`` per batch. The encoding must stay identical
to what the column types in ``types.py`` produce; ``tests/contract`` round-trips and
compares both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from bulkops.storage.records import RowRecord
from bulkops.storage.states import RowState

# Parameter order of the upsert; the encoders below follow it.
COLUMNS = (
    "operation_id",
    "row_number",
    "state",
    "row_id",
    "step_index",
    "step_name",
    "error_type",
    "error_message",
    "retry_attempt",
    "signal_key",
    "row_data",
    "steps",
    "waiting_since",
    "completed_at",
)
_KEY = ("operation_id", "row_number")


def upsert_sql(placeholder: str) -> str:
    """INSERT ... ON CONFLICT DO UPDATE replacing every non-key column (same on both)."""
    marks = ", ".join([placeholder] * len(COLUMNS))
    updates = ", ".join(f"{name} = excluded.{name}" for name in COLUMNS if name not in _KEY)
    return (
        f"INSERT INTO row_records ({', '.join(COLUMNS)}) VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {updates}"
    )


SQLITE_UPSERT = upsert_sql("?")
POSTGRES_UPSERT = upsert_sql("%s")
# PostgreSQL types of COLUMNS[1:]; the operation id is one scalar parameter.
_UNNEST_TYPES = (
    "int4", "text", "text", "int4", "text", "text", "text", "int4", "text", "jsonb", "jsonb",
    "timestamptz", "timestamptz",
)  # fmt: skip
POSTGRES_UNNEST = (
    f"INSERT INTO row_records ({', '.join(COLUMNS)}) "
    f"SELECT %s::uuid, * FROM unnest({', '.join(f'%s::{t}[]' for t in _UNNEST_TYPES)}) "
    f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in COLUMNS if name not in _KEY)
)


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}: bulkops stores aware UTC")
    return value


def sqlite_timestamp(value: datetime | None) -> str | None:
    """Naive UTC text in SQLAlchemy's SQLite DATETIME format (always with microseconds)."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = _aware(value).astimezone(UTC)
    # "YYYY-MM-DD HH:MM:SS.ffffff" is the first 26 characters; the rest is "+00:00".
    return value.isoformat(sep=" ", timespec="microseconds")[:26]


def _postgres_timestamp(value: datetime | None) -> datetime | None:
    return None if value is None else _aware(value)


def _cached(timestamp: Callable[[datetime | None], Any]) -> Callable[[datetime | None], Any]:
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


def _encoder(
    operation_id: Any, timestamp: Callable[[datetime | None], Any]
) -> Callable[[RowRecord], tuple[Any, ...]]:
    dumps = json.dumps
    timestamp = _cached(timestamp)

    def encode(row: RowRecord) -> tuple[Any, ...]:
        error_type = row.error_type
        return (
            operation_id,
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
            # Row-based operations have no steps: store NULL rather than "[]".
            dumps([step.to_json() for step in row.steps]) if row.steps else None,
            timestamp(row.waiting_since),
            timestamp(row.completed_at),
        )

    return encode


def _encode(
    dialect_name: str, operation_id: UUID, rows: Sequence[RowRecord]
) -> list[tuple[Any, ...]]:
    if dialect_name == "postgresql":
        encode = _encoder(operation_id, _postgres_timestamp)
    else:
        encode = _encoder(str(operation_id), sqlite_timestamp)
    return [encode(row) for row in rows]


def row_upsert(dialect_name: str, operation_id: UUID, rows: Sequence[RowRecord]) -> tuple[str, Any]:
    """The SQL and driver parameters that upsert ``rows`` (for ``exec_driver_sql``).

    SQLite gets an executemany. PostgreSQL gets one ``unnest`` statement for batches without
    JSON payloads (about 1.5x the rows/s of psycopg's async executemany), and the
    executemany otherwise (casting arrays of JSON text to jsonb made unnest slower there).
    """
    encoded = _encode(dialect_name, operation_id, rows)
    if dialect_name != "postgresql":
        return SQLITE_UPSERT, encoded
    if any(row.steps or row.row_data is not None for row in rows):
        return POSTGRES_UPSERT, encoded
    # One statement cannot update the same key twice: keep the last of each row number,
    # which is what consecutive upserts would have left.
    latest = {values[1]: values for values in encoded}
    columns = list(zip(*latest.values(), strict=True))
    return POSTGRES_UNNEST, (operation_id, *(list(column) for column in columns[1:]))


# Runs of consecutive plain successes (the bulk of most files) are written as one set-based
# statement each, generating the row numbers in the database, instead of binding fourteen
# parameters per row: the stored rows are exactly the same.
_RANGE_SELECT = "'Completed', NULL, 0, {step}, NULL, NULL, 0, NULL, NULL, NULL, NULL, {ts}"
_UPDATES = ", ".join(f"{name} = excluded.{name}" for name in COLUMNS if name not in _KEY)
SQLITE_RANGE_UPSERT = (
    "WITH RECURSIVE series(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM series WHERE n < ?) "
    f"INSERT INTO row_records ({', '.join(COLUMNS)}) "
    f"SELECT ?, n, {_RANGE_SELECT.format(step='?', ts='?')} FROM series WHERE true "
    f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {_UPDATES}"
)
POSTGRES_RANGE_UPSERT = (
    f"INSERT INTO row_records ({', '.join(COLUMNS)}) "
    f"SELECT %s, n, {_RANGE_SELECT.format(step='%s', ts='%s')} "
    "FROM generate_series(%s::int4, %s::int4) AS n "
    f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {_UPDATES}"
)


def _plain(row: RowRecord) -> bool:
    return (
        row.state is RowState.COMPLETED
        and row.step_index == 0
        and row.row_id is None
        and row.retry_attempt == 0
        and row.row_data is None
        and not row.steps
        and row.signal_key is None
        and row.waiting_since is None
        and row.error_type is None
        and row.error_message is None
        and row.completed_at is not None
    )


def split_plain_runs(
    rows: Sequence[RowRecord],
) -> tuple[list[tuple[int, int, str | None, datetime]], list[RowRecord]]:
    """Runs ``(first, last, step_name, completed_at)`` of consecutive plain successes
    sharing a step name and timestamp, and the other rows. Only batches whose row numbers
    are unique are split (a repeated row must keep last-write-wins order)."""
    if len({row.row_number for row in rows}) != len(rows):
        return [], list(rows)
    runs: list[tuple[int, int, str | None, datetime]] = []
    others: list[RowRecord] = []
    for row in sorted(rows, key=lambda r: r.row_number):
        stamp = row.completed_at
        if stamp is None or not _plain(row):
            others.append(row)
            continue
        if runs:
            first, last, step, at = runs[-1]
            if last + 1 == row.row_number and step == row.step_name and at == stamp:
                runs[-1] = (first, row.row_number, step, at)
                continue
        runs.append((row.row_number, row.row_number, row.step_name, stamp))
    return runs, others


def range_params(
    dialect_name: str, operation_id: UUID, runs: Sequence[tuple[int, int, str | None, datetime]]
) -> list[tuple[Any, ...]]:
    """Driver parameters of the range upsert for each run."""
    if dialect_name == "postgresql":
        return [(operation_id, step, _aware(at), first, last) for first, last, step, at in runs]
    key = str(operation_id)
    return [(first, last, key, step, sqlite_timestamp(at)) for first, last, step, at in runs]
