"""``bo.current_row()`` and ``bo.RowContext``: the key's shape, the error outside a row,
and the context seen by operations run with ``bulkops.testing.run_operation``."""

from __future__ import annotations

import asyncio
import dataclasses
from uuid import UUID, uuid4

import pytest

import bulkops as bo
from bulkops.examples.operations import ChargeCustomers, PaymentProvider
from bulkops.testing import run_operation

SEEN: list[tuple[str, bo.RowContext]] = []


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    n: int


@bo.operation("context-unit-rows")
class Rows(bo.RowOperation[Meta, Item]):
    def validate_row(self, row: Item, metadata: Meta) -> None:
        SEEN.append(("validate", bo.current_row()))

    async def process_row(self, row: Item, metadata: Meta) -> None:
        await asyncio.sleep(0)
        SEEN.append(("process", bo.current_row()))


@bo.operation("context-unit-pipeline")
class Pipeline(bo.PipelineOperation[Meta, Item]):
    @bo.step("First", order=1, max_retries=1)
    def first(self, row: Item, metadata: Meta) -> None:
        context = bo.current_row()
        SEEN.append(("First", context))
        if row.n == 2 and context.attempt == 1:
            raise RuntimeError("fails once")

    @bo.step("Second", order=2)
    async def second(self, row: Item, metadata: Meta) -> None:
        SEEN.append(("Second", bo.current_row()))


@bo.operation("context-unit-batch", batch_size=2)
class Batch(bo.BatchOperation[Meta, Item]):
    async def process_batch(self, rows: list[Item], metadata: Meta) -> None:
        bo.current_row()


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


def test_outside_a_row_it_is_a_lookup_error_that_says_where_it_works() -> None:
    with pytest.raises(LookupError, match=r"outside a row.*validate_row, process_row"):
        bo.current_row()


def test_the_idempotency_key_names_operation_row_and_step() -> None:
    operation_id = uuid4()
    context = bo.RowContext(
        operation_id=operation_id,
        operation_name="op",
        row_number=7,
        row_id=None,
        step_name=None,
        step_index=-1,
        attempt=1,
        retry_attempt=0,
        created_by="alice",
    )
    assert context.idempotency_key == f"{operation_id}:7:-1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.row_number = 8  # type: ignore[misc]
    assert bo.current_row.__doc__ and bo.RowContext.__doc__


async def test_run_operation_gives_each_row_its_context() -> None:
    result = await run_operation(Rows, "n\n1\n2\n3\n", max_row_concurrency=2)
    assert result.status is bo.OperationStatus.COMPLETED
    operation_id = result.record.id
    assert isinstance(operation_id, UUID)
    by_place = {
        place: sorted(
            (c.row_number, c.step_index, c.idempotency_key) for p, c in SEEN if p == place
        )
        for place in ("validate", "process")
    }
    assert by_place == {
        "validate": [(n, -1, f"{operation_id}:{n}:-1") for n in (1, 2, 3)],
        "process": [(n, 0, f"{operation_id}:{n}:0") for n in (1, 2, 3)],
    }
    assert {c.created_by for _, c in SEEN} == {result.record.created_by}
    assert {c.operation_name for _, c in SEEN} == {"context-unit-rows"}
    with pytest.raises(LookupError):
        bo.current_row()


async def test_run_operation_counts_per_step_attempts() -> None:
    result = await run_operation(Pipeline, "n\n1\n2\n")
    assert result.status is bo.OperationStatus.COMPLETED
    firsts = sorted((c.row_number, c.attempt, c.idempotency_key) for p, c in SEEN if p == "First")
    key = f"{result.record.id}:{{}}:0"
    assert firsts == [(1, 1, key.format(1)), (2, 1, key.format(2)), (2, 2, key.format(2))]
    seconds = [(c.step_name, c.step_index, c.attempt) for p, c in SEEN if p == "Second"]
    assert seconds == [("Second", 1, 1)] * 2


async def test_process_batch_is_told_there_is_no_single_row() -> None:
    result = await run_operation(Batch, "n\n1\n2\n3\n")
    messages = {row.error_message for row in result.failed_rows}
    assert len(result.failed_rows) == 3
    assert len(messages) == 1 and "process_batch" in messages.pop()  # type: ignore[operator]


async def test_the_example_charges_each_row_once_however_often_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = PaymentProvider()
    monkeypatch.setattr(ChargeCustomers, "provider", provider)
    content = "customer,amount_cents\nc1,500\nc2,700\n"
    first = await run_operation(ChargeCustomers, content)
    assert first.status is bo.OperationStatus.COMPLETED
    assert sorted(provider.charges) == [f"{first.record.id}:{n}:0" for n in (1, 2)]
    assert sorted(provider.charges.values()) == [("c1", 500), ("c2", 700)]
    # A run again of the same row's step (after a crash, a retry) charges nothing more.
    key = f"{first.record.id}:1:0"
    assert provider.charge("c1", 500, idempotency_key=key) == key
    assert len(provider.charges) == 2
    # Another operation over the same file is another charge per row.
    second = await run_operation(ChargeCustomers, content)
    assert second.status is bo.OperationStatus.COMPLETED
    assert len(provider.charges) == 4
