"""Pipeline definitions: step declarations, ordering, load-time errors, backoff."""

from __future__ import annotations

from datetime import timedelta

import pytest

import bulkops as bo
from bulkops.definition import StepKind, definition_of
from bulkops.engine.pipeline import MAX_BACKOFF, backoff_delay
from bulkops.errors import DefinitionError


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


def test_step_settings_are_kept_in_the_definition() -> None:
    @bo.operation("full")
    class Full(bo.PipelineOperation[Meta, Item]):
        @bo.step("B", order=2, max_retries=3, allow_operation_retry=False)
        async def b(self, row: Item, metadata: Meta) -> None: ...

        @bo.signal_step("A", order=1, key=lambda row, md: row.name, timeout=timedelta(minutes=1))
        async def a(self, row: Item, metadata: Meta) -> None: ...

        @bo.polling_step("C", order=3, poll_interval=timedelta(seconds=5), timeout=60)
        async def c(self, row: Item, metadata: Meta) -> None: ...

        @c.check
        async def c_done(self, row: Item, metadata: Meta) -> bool:
            return True

    definition = definition_of(Full)
    assert definition is not None and definition.is_step_based
    a, b, c = definition.steps
    assert [(s.name, s.index) for s in (a, b, c)] == [("A", 0), ("B", 1), ("C", 2)]
    assert (a.kind, a.timeout, a.poll_interval) == (StepKind.SIGNAL, 60.0, 0.0)
    assert (b.max_retries, b.allow_operation_retry, b.kind) == (3, False, StepKind.PLAIN)
    assert (c.kind, c.poll_interval, c.timeout, c.check_name) == (
        StepKind.POLLING,
        5.0,
        60.0,
        "c_done",
    )
    # Decorated methods still behave as methods.
    assert Full().c_done.__name__ == "c_done"


def test_ties_in_order_keep_declaration_order() -> None:
    @bo.operation("ties")
    class Ties(bo.PipelineOperation[Meta, Item]):
        @bo.step("second")
        async def x(self, row: Item, metadata: Meta) -> None: ...

        @bo.step("first", order=-1)
        async def y(self, row: Item, metadata: Meta) -> None: ...

        @bo.step("third")
        async def z(self, row: Item, metadata: Meta) -> None: ...

    definition = definition_of(Ties)
    assert definition is not None
    assert [s.name for s in definition.steps] == ["first", "second", "third"]


def test_duplicate_step_names_are_rejected_at_load() -> None:
    class Dup(bo.Step):
        name = "Same"

        async def run(self, row: Item, metadata: Meta) -> None: ...

    with pytest.raises(DefinitionError, match=r"(?i)two steps named 'same'"):

        @bo.operation("dup")
        class Duplicate(bo.PipelineOperation[Meta, Item]):
            def steps(self) -> list[bo.Step]:
                return [Dup()]

            @bo.step("same")
            async def a(self, row: Item, metadata: Meta) -> None: ...


def test_polling_step_without_check_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="needs a completion check"):

        @bo.operation("nocheck")
        class NoCheck(bo.PipelineOperation[Meta, Item]):
            @bo.polling_step("P", poll_interval=1)
            async def p(self, row: Item, metadata: Meta) -> None: ...


def test_pipeline_without_steps_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="declares no steps"):

        @bo.operation("empty")
        class Empty(bo.PipelineOperation[Meta, Item]):
            pass


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: bo.step("", order=1), "non-empty"),
        (lambda: bo.step("x", max_retries=-1), "max_retries"),
        (lambda: bo.signal_step("x", key="notcallable"), "callable key"),  # type: ignore[arg-type]
        (lambda: bo.signal_step("x", key=str, timeout=0), "timeout must be positive"),
        (lambda: bo.polling_step("x", poll_interval=timedelta(0)), "poll_interval"),
    ],
)
def test_bad_step_declarations(factory: object, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        factory()  # type: ignore[operator]


def test_check_is_only_for_polling_steps() -> None:
    plain = bo.step("x")(lambda self, row, md: None)
    with pytest.raises(DefinitionError, match="not a polling step"):
        plain.check(lambda self, row, md: True)


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    for attempt in range(1, 12):
        ceiling = min(MAX_BACKOFF, 1.0 * 2 ** (attempt - 1))
        for _ in range(50):
            delay = backoff_delay(attempt, 1.0)
            assert ceiling * 0.5 <= delay <= ceiling
    assert backoff_delay(3, 0) == 0.0
    assert max(backoff_delay(40, 1.0) for _ in range(20)) <= MAX_BACKOFF
