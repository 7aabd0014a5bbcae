"""The API's SQLite reader threads yield the CPU to processing only in a process that
processes rows; in one that only answers requests (``serve``'s HTTP process beside its
worker processes, ``--role api``) they keep the process's priority."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from bulkops.storage.sql import Database
from bulkops.storage.sql.database import READER_NICE


def _nice(_connection: sqlite3.Connection) -> int:
    """The nice value of the thread that runs the read."""
    return os.getpriority(os.PRIO_PROCESS, 0)


@pytest.mark.parametrize("processing_here", [True, False], ids=["processing-here", "api-only"])
async def test_reader_threads_yield_the_cpu_only_where_rows_are_processed(
    tmp_path: Path, processing_here: bool
) -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    database = Database.from_url(
        f"sqlite:///{tmp_path / 'reads.db'}", processing_here=processing_here
    )
    try:
        read_at = await database.read_sqlite(_nice)
        page_at = await database.read_core(lambda conn: os.getpriority(os.PRIO_PROCESS, 0))
    finally:
        await database.close()
    lowered = min(19, own + READER_NICE) if processing_here else own
    assert read_at == page_at == lowered
