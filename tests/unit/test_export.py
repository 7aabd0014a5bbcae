"""The export service on the memory store: validation, encoders, chunking, closing."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import AsyncIterator, Collection
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import bulkops as bo
from bulkops.definition import Registry
from bulkops.errors import BadRequest, Conflict, NotFound
from bulkops.service.export import DATA_COLUMNS, FLUSH_ROWS, Export, ExportService
from bulkops.storage.memory import MemoryStore
from bulkops.storage.records import OperationRecord, ProgressDelta, ReportValues, RowRecord
from bulkops.storage.states import ErrorType, OperationStatus, RowState

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str
    count: int | None = None


@bo.operation("kept", track_row_data=True)
class Kept(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        pass


@bo.operation("plain")
class Plain(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        pass


async def _operation(store: MemoryStore, name: str, rows: list[RowRecord]) -> uuid.UUID:
    operation_id = uuid.uuid4()
    await store.add(
        OperationRecord(
            id=operation_id,
            operation_name=name,
            status=OperationStatus.RUNNING,
            created_by="tests",
            created_at=T0,
            source="tests",
            file_id="f",
            file_name="f.csv",
            file_size=1,
            file_format="csv",
            metadata={},
        )
    )
    for row in rows:
        row.operation_id = operation_id
    await store.save(operation_id, rows, ProgressDelta())
    return operation_id


def _row(number: int, data: dict[str, Any] | None = None, **fields: Any) -> RowRecord:
    values: dict[str, Any] = {
        "state": RowState.COMPLETED,
        "step_name": "process",
        "completed_at": T0,
        **fields,
    }
    return RowRecord(operation_id=uuid.UUID(int=0), row_number=number, row_data=data, **values)


async def _text(export: Export) -> str:
    return b"".join([chunk async for chunk in export.chunks]).decode()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def service(store: MemoryStore) -> ExportService:
    return ExportService(store, store, Registry([Kept, Plain]))


async def test_request_errors_are_raised_before_anything_streams(
    store: MemoryStore, service: ExportService
) -> None:
    plain = await _operation(store, "plain", [_row(1)])
    gone = await _operation(store, "unregistered", [_row(1)])
    with pytest.raises(NotFound):
        await service.export(uuid.uuid4())
    with pytest.raises(BadRequest, match="Invalid mode 'xml': expected one of report, data"):
        await service.export(plain, mode="xml")
    with pytest.raises(BadRequest, match="Invalid format 'ods': expected one of csv, json"):
        await service.export(plain, file_format="ods")
    with pytest.raises(Conflict, match="operation 'plain' does not keep row data"):
        await service.export(plain, mode="data")
    with pytest.raises(Conflict, match="operation 'unregistered' does not keep row data"):
        await service.export(gone, mode="data")
    report = await service.export(gone, mode=" Report ", file_format="JSONL")
    assert report.file_name == f"operation-{gone}-report.jsonl"
    assert report.media_type == "application/x-ndjson"


async def test_timestamps_are_utc_with_z(store: MemoryStore, service: ExportService) -> None:
    berlin = timezone(timedelta(hours=2))
    operation_id = await _operation(
        store,
        "kept",
        [
            _row(1, completed_at=datetime(2024, 6, 1, 14, 0, 0, 250, tzinfo=berlin)),
            _row(2, completed_at=None, state=RowState.PENDING),
        ],
    )
    items = json.loads(await _text(await service.export(operation_id, file_format="json")))
    assert items[0]["completedAt"] == "2024-06-01T12:00:00.000250Z"
    assert "completedAt" not in items[1] and items[1]["state"] == "Pending"


async def test_empty_exports_are_still_well_formed(
    store: MemoryStore, service: ExportService
) -> None:
    operation_id = await _operation(store, "kept", [])
    assert json.loads(await _text(await service.export(operation_id, file_format="json"))) == []
    assert await _text(await service.export(operation_id, file_format="jsonl")) == ""
    data = await _text(await service.export(operation_id, mode="data"))
    assert data == "name,count,_rowNumber,_state,_errorType,_errorMessage\r\n"


async def test_data_values_that_are_not_text_become_json_in_csv(
    store: MemoryStore, service: ExportService
) -> None:
    data = {"name": "Ann", "count": 3, "flag": True, "nested": {"a": [1, "x"]}, "none": None}
    failed = {
        "state": RowState.FAILED,
        "error_type": ErrorType.PROCESSING,
        "error_message": 'said "no", twice',
    }
    operation_id = await _operation(store, "kept", [_row(1, data, **failed)])
    text = await _text(await service.export(operation_id, mode="data"))
    header, values = csv.reader(io.StringIO(text))
    assert header == ["name", "count", "flag", "nested", "none", *DATA_COLUMNS]
    assert values == [
        "Ann",
        "3",
        "true",
        '{"a": [1, "x"]}',
        "",
        "1",
        "Failed",
        "Processing",
        'said "no", twice',
    ]
    # JSON keeps the values (and nulls of the row data) as they were.
    (item,) = json.loads(
        await _text(await service.export(operation_id, mode="data", file_format="json"))
    )
    assert item == {
        **data,
        "_rowNumber": 1,
        "_state": "Failed",
        "_errorType": "Processing",
        "_errorMessage": 'said "no", twice',
    }


async def test_later_unknown_keys_are_dropped_in_csv_and_kept_in_json(
    store: MemoryStore, service: ExportService
) -> None:
    rows = [
        _row(1, {"NAME": "a", "extra": "1", "_line": "raw", "_state": "old"}),
        _row(2, {"name": "b", "count": "2", "late": "x"}),
    ]
    operation_id = await _operation(store, "kept", rows)
    text = await _text(await service.export(operation_id, mode="data"))
    assert text.splitlines() == [
        "name,count,extra,_rowNumber,_state,_errorType,_errorMessage",
        "a,,1,1,Completed,,",
        "b,2,,2,Completed,,",
    ]
    lines = await _text(await service.export(operation_id, mode="data", file_format="jsonl"))
    first, second = (json.loads(line) for line in lines.splitlines())
    assert first == {
        "NAME": "a",
        "extra": "1",
        "_line": "raw",
        "_rowNumber": 1,
        "_state": "Completed",
    }
    assert second["late"] == "x"


async def test_chunks_come_every_few_hundred_rows(
    store: MemoryStore, service: ExportService
) -> None:
    total = FLUSH_ROWS * 3 + 7
    operation_id = await _operation(store, "kept", [_row(n) for n in range(1, total + 1)])
    export = await service.export(operation_id, file_format="jsonl")
    chunks = [chunk async for chunk in export.chunks]
    assert len(chunks) == 4
    assert [chunk.count(b"\n") for chunk in chunks] == [FLUSH_ROWS] * 3 + [7]
    # A filter that keeps nothing in a stretch of rows sends no empty chunk.
    only_last = await service.export(operation_id, file_format="jsonl", state="pending")
    assert [chunk async for chunk in only_last.chunks] == []


class ClosingRows:
    """A row store whose iterator records being closed."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.closed = False

    async def iterate(
        self,
        operation_id: uuid.UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
    ) -> AsyncIterator[RowRecord]:
        try:
            async for row in self.store.iterate(operation_id, batch_size=batch_size, states=states):
                yield row
        finally:
            self.closed = True

    async def report_batches(
        self,
        operation_id: uuid.UUID,
        *,
        batch_size: int = 1000,
        states: Collection[RowState] | None = None,
    ) -> AsyncIterator[list[ReportValues]]:
        batches = self.store.report_batches(operation_id, batch_size=batch_size, states=states)
        try:
            async for batch in batches:
                yield batch
        finally:
            self.closed = True

    async def fixes(self, operation_id: uuid.UUID) -> dict[int, dict[str, Any]]:
        return await self.store.fixes(operation_id)


async def test_closing_the_stream_early_releases_the_store_iterator(store: MemoryStore) -> None:
    operation_id = await _operation(store, "kept", [_row(n) for n in range(1, FLUSH_ROWS * 4)])
    rows = ClosingRows(store)
    service = ExportService(store, rows, Registry([Kept]))  # type: ignore[arg-type]
    export = await service.export(operation_id)
    chunks = export.chunks
    first = await anext(chunks)
    assert first.startswith(b"rowNumber,")
    assert not rows.closed
    await chunks.aclose()  # type: ignore[attr-defined]
    assert rows.closed
