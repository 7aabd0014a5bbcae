"""The rows an operation has stored, read straight from its database by the tests that
stop processes or databases: row records, and the rows of spans (plain completions stored
as one ``row_spans`` row per run of consecutive rows), as (row number, state)."""

from __future__ import annotations

import sqlite3
from typing import Any

_POSTGRES = (
    "SELECT row_number, state FROM row_records WHERE operation_id = %(id)s UNION ALL "
    "SELECT n, 'Completed' FROM row_spans, generate_series(first_row, last_row) AS n "
    "WHERE operation_id = %(id)s"
)
_SQLITE = (
    "WITH RECURSIVE series(n, last) AS (SELECT first_row, last_row FROM row_spans "
    "WHERE operation_id = :id UNION ALL SELECT n + 1, last FROM series WHERE n < last) "
    "SELECT row_number, state FROM row_records WHERE operation_id = :id UNION ALL "
    "SELECT n, 'Completed' FROM series"
)
FINAL = ("Completed", "Failed")


def postgres_rows(db: Any, operation_id: str) -> list[tuple[int, str]]:
    """Every stored row of the operation on a psycopg connection (one entry per time a row
    is stored: a row stored twice shows twice)."""
    return [(int(n), str(state)) for n, state in db.execute(_POSTGRES, {"id": operation_id})]


def sqlite_rows(db: sqlite3.Connection, operation_id: str) -> list[tuple[int, str]]:
    """``postgres_rows`` on a sqlite3 connection."""
    return [(int(n), str(state)) for n, state in db.execute(_SQLITE, {"id": operation_id})]


def final_names(rows: list[tuple[int, str]]) -> set[str]:
    """The names (r<number>) of the rows stored Completed or Failed."""
    return {f"r{number}" for number, state in rows if state in FINAL}
