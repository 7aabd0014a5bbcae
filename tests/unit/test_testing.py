"""bulkops.testing runs an operation through the real engine on memory storage."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from openpyxl import Workbook

import bulkops as bo
from bulkops.testing import run_operation, run_operation_sync


class Meta(bo.Metadata):
    prefix: str = ""


class Item(bo.Row):
    sku: str
    price: float


SEEN: list[str] = []


@bo.operation("price-update")
class PriceUpdate(bo.RowOperation[Meta, Item]):
    async def validate_row(self, row: Item, metadata: Meta) -> None:
        if row.price < 0:
            raise bo.ValidationError("price must not be negative")

    async def process_row(self, row: Item, metadata: Meta) -> None:
        if row.sku == "locked":
            raise PermissionError("sku is locked")
        SEEN.append(metadata.prefix + row.sku)


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


async def test_run_operation_reports_rows_and_events() -> None:
    result = await run_operation(
        PriceUpdate,
        "sku,price\na,1.5\nb,-1\nlocked,2\nc,x\n",
        metadata={"prefix": "p-"},
    )
    assert result.status is bo.OperationStatus.COMPLETED_WITH_ERRORS
    assert SEEN == ["p-a"]
    assert [r.row_number for r in result.failed_rows] == [2, 3, 4]
    failed = {r.row_number: r for r in result.failed_rows}
    assert failed[2].error_type is bo.ErrorType.VALIDATION
    assert failed[3].error_type is bo.ErrorType.PROCESSING
    assert failed[3].error_message == "sku is locked"
    assert failed[4].error_message.startswith("price: Input should be a valid number")
    assert result.record.total_rows == 4 and result.record.successful_rows == 1
    assert [e.type.value for e in result.events].count("RowFailed") == 3


def test_run_operation_sync_with_json_lines() -> None:
    result = run_operation_sync(
        PriceUpdate,
        '{"sku": "a", "price": 1}\n{"sku": "b", "price": 2}\n',
        file_format="jsonl",
        max_row_concurrency=2,
    )
    assert result.status is bo.OperationStatus.COMPLETED
    assert sorted(SEEN) == ["a", "b"]


async def test_run_operation_reads_a_chosen_worksheet_and_gzip(tmp_path: Path) -> None:
    book = Workbook()
    book.active.append(["note"])
    prices = book.create_sheet("Prices")
    prices.append(["sku", "price"])
    prices.append(["a", 1])
    prices.append(["b", 2.5])
    content = io.BytesIO()
    book.save(content)

    result = await run_operation(
        PriceUpdate, content.getvalue(), file_format="xlsx", sheet="Prices"
    )
    assert result.status is bo.OperationStatus.COMPLETED
    assert SEEN == ["a", "b"]

    packed = tmp_path / "prices.csv.gz"
    packed.write_bytes(gzip.compress(b"sku,price\nc,3\n"))
    assert (await run_operation(PriceUpdate, packed)).record.total_rows == 1
