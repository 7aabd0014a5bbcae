"""The row upsert of ``save()``: the hot path of a bulk operation, at driver level.

Rows are encoded by ``codec`` straight into driver tuples and sent with one
``executemany`` (or one ``unnest``) per batch; spans of plain successes are written as one
set-based statement each.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from uuid import UUID

from bulkops.storage.records import CompletedSpan, EventRecord, Fence, ProgressDelta, RowRecord
from bulkops.storage.spans import Span, append_span
from bulkops.storage.sql.codec import ROW_COLUMNS, ROW_KEY, postgres_rows
from bulkops.storage.sql.kept import Kept
from bulkops.storage.states import RowState

_COLUMN_LIST = ", ".join(ROW_COLUMNS)
_UPDATES = ", ".join(f"{name} = excluded.{name}" for name in ROW_COLUMNS if name not in ROW_KEY)
_CONFLICT = f"ON CONFLICT ({', '.join(ROW_KEY)}) DO UPDATE SET {_UPDATES}"


def upsert_sql(placeholder: str) -> str:
    """INSERT ... ON CONFLICT DO UPDATE replacing every non-key column (same on both)."""
    marks = ", ".join([placeholder] * len(ROW_COLUMNS))
    return f"INSERT INTO row_records ({_COLUMN_LIST}) VALUES ({marks}) {_CONFLICT}"


SQLITE_UPSERT = upsert_sql("?")
POSTGRES_UPSERT = upsert_sql("%s")
# PostgreSQL array types of the columns after the operation id (one scalar parameter).
_PG_TYPES = {
    "row_number": "int4",
    "step_index": "int4",
    "retry_attempt": "int4",
    "row_data": "jsonb",
    "steps": "jsonb",
    "waiting_since": "timestamptz",
    "completed_at": "timestamptz",
}
POSTGRES_UNNEST = (
    f"INSERT INTO row_records ({_COLUMN_LIST}) SELECT %s::uuid, * FROM unnest("
    + ", ".join(f"%s::{_PG_TYPES.get(name, 'text')}[]" for name in ROW_COLUMNS[1:])
    + f") {_CONFLICT}"
)


# Large batches go through COPY (binary) into a staging table of the session, then one
# set-based upsert from it: the fastest of this module's paths for large batches, with or
# without JSON; below about 64 rows COPY's extra round trips cost more than they save.
COPY_MIN_ROWS = 64
_COPY_TYPES = {
    "operation_id": "uuid",
    "row_number": "int4",
    "step_index": "int4",
    "retry_attempt": "int4",
    "waiting_since": "timestamptz",
    "completed_at": "timestamptz",
}
# The binary type of each column in ROW_COLUMNS order: JSON travels as text, cast on merge.
COPY_TYPES = [_COPY_TYPES.get(name, "text") for name in ROW_COLUMNS]
_STAGING = "row_records_incoming"
POSTGRES_STAGING = (
    f"CREATE TEMP TABLE {_STAGING} ("
    + ", ".join(f"{name} {kind}" for name, kind in zip(ROW_COLUMNS, COPY_TYPES, strict=True))
    + ") ON COMMIT DELETE ROWS"
)
POSTGRES_COPY = f"COPY {_STAGING} ({_COLUMN_LIST}) FROM STDIN (FORMAT BINARY)"
_JSON_COLUMNS = ("row_data", "steps")
POSTGRES_MERGE = (
    f"INSERT INTO row_records ({_COLUMN_LIST}) SELECT "
    + ", ".join(f"{name}::jsonb" if name in _JSON_COLUMNS else name for name in ROW_COLUMNS)
    + f" FROM {_STAGING} {_CONFLICT}"
)


def postgres_upsert(operation_id: UUID, rows: Sequence[RowRecord]) -> tuple[str, Any]:
    """The SQL and driver parameters that upsert ``rows`` on PostgreSQL.

    One ``unnest`` statement for batches without JSON payloads (one statement instead of
    psycopg's async executemany), the executemany otherwise (casting arrays of JSON text to
    jsonb would make unnest the slower one there).
    """
    encoded = postgres_rows(operation_id, rows)
    if any(row.steps or row.row_data is not None for row in rows):
        return POSTGRES_UPSERT, encoded
    # One statement cannot update the same key twice: keep the last of each row number,
    # which is what consecutive upserts would have left.
    latest = {values[1]: values for values in encoded}
    columns = list(zip(*latest.values(), strict=True))
    return POSTGRES_UNNEST, (operation_id, *(list(column) for column in columns[1:]))


# Runs of consecutive plain successes (the bulk of most files) are stored as one
# ``row_spans`` row each, not one ``row_records`` row per row. A span's write first removes
# the records its rows may have from an earlier round (a row is stored in one place).
_SPAN_COLUMNS = "operation_id, last_row, first_row, step_index, step_name, completed_at"
_SPAN_CONFLICT = (
    "ON CONFLICT (operation_id, last_row) DO UPDATE SET first_row = excluded.first_row, "
    "step_index = excluded.step_index, step_name = excluded.step_name, "
    "completed_at = excluded.completed_at"
)


def _span_sql(placeholder: str) -> tuple[str, str]:
    marks = ", ".join([placeholder] * 6)
    clear = (
        f"DELETE FROM row_records WHERE operation_id = {placeholder} "
        f"AND row_number BETWEEN {placeholder} AND {placeholder}"
    )
    return clear, f"INSERT INTO row_spans ({_SPAN_COLUMNS}) VALUES ({marks}) {_SPAN_CONFLICT}"


# Parameters: (operation id, first, last) to clear, then those that store it
# (``codec.span_parameters`` makes both).
SQLITE_SPAN_CLEAR, SQLITE_SPAN_UPSERT = _span_sql("?")
POSTGRES_SPAN_CLEAR, POSTGRES_SPAN_UPSERT = _span_sql("%s")


# A restart runs Completed rows again: it first writes its operation's spans back as the
# row records they stand for, which it then resets as it resets every stored row.
_RECORD_COLUMNS = (
    "operation_id, row_number, state, step_index, step_name, retry_attempt, completed_at"
)
SQLITE_SPANS_TO_RECORDS = (
    "WITH RECURSIVE series(n, last, step_index, step_name, at) AS ("
    "SELECT first_row, last_row, step_index, step_name, completed_at FROM row_spans "
    "WHERE operation_id = :operation_id UNION ALL "
    "SELECT n + 1, last, step_index, step_name, at FROM series WHERE n < last) "
    f"INSERT INTO row_records ({_RECORD_COLUMNS}) "
    f"SELECT :operation_id, n, '{RowState.COMPLETED.value}', step_index, step_name, 0, at "
    "FROM series WHERE true ON CONFLICT DO NOTHING"
)
POSTGRES_SPANS_TO_RECORDS = (
    f"INSERT INTO row_records ({_RECORD_COLUMNS}) "
    f"SELECT s.operation_id, n, '{RowState.COMPLETED.value}', s.step_index, s.step_name, 0, "
    "s.completed_at FROM row_spans AS s, generate_series(s.first_row, s.last_row) AS n "
    "WHERE s.operation_id = :operation_id ON CONFLICT DO NOTHING"
)
SPANS_CLEARED = "DELETE FROM row_spans WHERE operation_id = :operation_id"


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


def split_plain_spans(rows: Sequence[RowRecord]) -> tuple[list[CompletedSpan], list[RowRecord]]:
    """Spans of consecutive plain successes sharing a step name and timestamp, and the
    other rows. Only batches whose row numbers are unique are split (a repeated row must
    keep last-write-wins order)."""
    if len({row.row_number for row in rows}) != len(rows):
        return [], list(rows)
    by_step: dict[str | None, list[Span]] = {}
    others: list[RowRecord] = []
    for row in sorted(rows, key=lambda r: r.row_number):
        stamp = row.completed_at
        if stamp is None or not _plain(row):
            others.append(row)
            continue
        append_span(by_step.setdefault(row.step_name, []), row.row_number, row.row_number, stamp)
    spans = [
        CompletedSpan(first, last, step, at)
        for step, each in by_step.items()
        for first, last, at in each
    ]
    return spans, others


@dataclass(frozen=True, slots=True)
class SplitRows:
    """The rows of one save as the SQL writes them: spans of plain completions (one range
    statement each), the other rows (upserted), and the step names of Completed rows that
    ``completed_steps`` may not list yet."""

    spans: Sequence[CompletedSpan]
    others: Sequence[RowRecord]
    new_steps: Collection[str] = ()


class SplitWrite(NamedTuple):
    """One write of ``save_many`` as the dialects take it: its rows split, the counter
    increments, the events to write in the transaction (none when the feed is elsewhere)
    and its fence."""

    operation_id: UUID
    rows: SplitRows
    delta: ProgressDelta
    events: Sequence[EventRecord]
    fence: Fence | None


def completed_step_names(spans: Sequence[CompletedSpan], others: Sequence[RowRecord]) -> set[str]:
    """The step names of the Completed rows among ``spans`` and ``others`` ('' for none)."""
    names = {span.step_name or "" for span in spans}
    names.update(row.step_name or "" for row in others if row.state is RowState.COMPLETED)
    return names


class ListedSteps:
    """The step names this process knows ``completed_steps`` lists, per operation, so a
    save inserts a name only the first time (names are never removed)."""

    def __init__(self) -> None:
        self._listed: Kept[UUID, frozenset[str]] = Kept(1024)

    def new(self, operation_id: UUID, names: set[str]) -> frozenset[str]:
        """The names of ``names`` not known to be listed."""
        return frozenset(names - (self._listed.get(operation_id) or frozenset()))

    def add(self, operation_id: UUID, names: Collection[str]) -> None:
        """Note ``names`` as listed (after the transaction that inserted them committed)."""
        listed = self._listed.get(operation_id) or frozenset()
        self._listed.put(operation_id, listed | frozenset(names))
