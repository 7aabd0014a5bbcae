"""OpenTelemetry spans: one per operation run and one per pipeline step of each row."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import bulkops as bo
from bulkops.testing import run_operation

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # once per process: the API refuses a second one


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


@bo.operation("traced-pipeline")
class TracedPipeline(bo.PipelineOperation[Meta, Item]):
    @bo.step("Check", order=1)
    async def check(self, row: Item, metadata: Meta) -> None:
        pass

    @bo.step("Send", order=2)
    async def send(self, row: Item, metadata: Meta) -> None:
        if row.name == "bad":
            raise RuntimeError("refused")


async def test_spans_per_operation_and_per_step(spans: InMemorySpanExporter) -> None:
    result = await run_operation(TracedPipeline, "name\nann\nbad\n")

    finished = spans.get_finished_spans()
    (operation,) = [s for s in finished if s.name == "bulkops.operation"]
    steps = [s for s in finished if s.name == "bulkops.step"]
    assert operation.attributes is not None
    assert operation.attributes["bulkops.operation.id"] == str(result.record.id)
    assert operation.attributes["bulkops.operation.name"] == "traced-pipeline"
    assert sorted((s.attributes or {})["bulkops.row"] for s in steps) == [1, 1, 2, 2]
    assert {(s.attributes or {})["bulkops.step"] for s in steps} == {"Check", "Send"}
    assert all(
        s.parent is not None and s.parent.span_id == operation.context.span_id for s in steps
    )
