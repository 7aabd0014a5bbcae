"""Run an operation over a file in memory, for users' own unit tests.

Example:
    result = bulkops.testing.run_operation_sync(
        ImportUsers, "name,email\\nAda,ada@example.com\\n", metadata={"requestedBy": "me"}
    )
    assert result.status is bulkops.OperationStatus.COMPLETED
    assert result.failed_rows == []

The operation runs through the real engine (validation, processing, counters, events) on
in-memory storage, so what passes here behaves the same in the service.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from uuid import UUID

from bulkops.definition.operation import OperationDefinition
from bulkops.definition.registry import Registry
from bulkops.engine.scheduler import WorkScheduler
from bulkops.runtime import MEMORY_URL, Runtime
from bulkops.service.submission import Upload
from bulkops.settings import Settings
from bulkops.storage.records import EventRecord, OperationRecord, RowRecord
from bulkops.storage.states import OperationStatus, RowState

_EXTENSIONS = {"csv": "csv", "json": "json", "jsonl": "jsonl"}


@dataclass(frozen=True)
class OperationResult:
    """What happened to an operation run by ``run_operation``."""

    record: OperationRecord
    rows: list[RowRecord]
    events: list[EventRecord]
    undo: OperationResult | None = None  # the undo operation, when ``undo=True`` asked

    @property
    def status(self) -> OperationStatus:
        """The final status."""
        return self.record.status

    @property
    def failed_rows(self) -> list[RowRecord]:
        """Rows whose state is Failed, by row number."""
        return [row for row in self.rows if row.state is RowState.FAILED]


async def _chunks(content: bytes) -> AsyncIterator[bytes]:
    yield content


async def run_operation(
    operation: type | OperationDefinition,
    content: str | bytes | Path,
    *,
    metadata: dict[str, Any] | None = None,
    file_format: str = "csv",
    max_row_concurrency: int = 1,
    column_map: dict[str, str] | None = None,
    sheet: str | None = None,
    undo: bool = False,
) -> OperationResult:
    """Create and process one operation in memory; return its record, rows and events.

    The operation's controls apply as in the service: failure thresholds, batches, rate
    limits, the CSV delimiter and the schema version.

    Args:
        operation: The operation class (decorated with ``@bulkops.operation``).
        content: The file's text or bytes, or a path to read.
        metadata: The metadata object (default: empty).
        file_format: ``csv``, ``json``, ``jsonl`` or ``xlsx`` (ignored for paths with a
            known suffix; a ``.gz`` path is read decompressed).
        max_row_concurrency: Rows (or batches) processed in parallel.
        column_map: File column -> row field, as the ``columnMap`` form field.
        sheet: The XLSX worksheet to read, as the ``sheet`` form field (default: the first).
        undo: Then undo the finished operation (``POST /api/bulks/{id}/undo``) and run
            the undo operation too: its result is the result's ``undo``.
    """
    if isinstance(content, Path):
        name = content.name
        data = content.read_bytes()
    else:
        name = f"upload.{_EXTENSIONS.get(file_format, file_format)}"
        data = content.encode() if isinstance(content, str) else content
    settings = Settings(
        database_url=MEMORY_URL,
        files_url=MEMORY_URL,
        worker_count=1,
        max_row_concurrency=max_row_concurrency,
        flush_interval=0.05,
    )
    runtime = await Runtime.open(settings, Registry([operation]), role="worker")
    try:
        await runtime.start()
        name_of = next(iter(runtime.registry)).name
        created = await runtime.submissions.create(
            operation_name=name_of,
            metadata=json.dumps(metadata or {}),
            upload=Upload(file_name=name, content_type=None, chunks=_chunks(data)),
            column_map=None if column_map is None else json.dumps(column_map),
            sheet=sheet,
        )
        result = await _finished(runtime, created.record.id)
        if not undo:
            return result
        undone = await runtime.undos.undo(created.record.id)
        return replace(result, undo=await _finished(runtime, undone.id))
    finally:
        await runtime.close()


async def _finished(runtime: Runtime, operation_id: UUID) -> OperationResult:
    """The operation once the worker is idle: its record, rows and events."""
    scheduler = runtime.scheduler
    if isinstance(scheduler, WorkScheduler):
        await scheduler.wait_idle()
    final = await runtime.queries.get(operation_id)
    rows = [row async for row in runtime.stores.rows.iterate(operation_id)]
    events = await runtime.stores.events.read(after=0, limit=1_000_000)
    mine = [event for event in events if event.operation_id == operation_id]
    return OperationResult(record=final, rows=rows, events=mine)


def run_operation_sync(
    operation: type | OperationDefinition,
    content: str | bytes | Path,
    **options: Any,
) -> OperationResult:
    """``run_operation`` for synchronous tests (starts its own event loop)."""
    return asyncio.run(run_operation(operation, content, **options))
