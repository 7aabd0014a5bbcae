"""Pipeline steps: the ``@step``, ``@signal_step`` and ``@polling_step`` decorators, and the
``Step`` classes for steps given as objects."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from bulkops.definition.controls import RateLimit
from bulkops.errors import DefinitionError

F = TypeVar("F", bound=Callable[..., Any])
U = TypeVar("U", bound=Callable[..., Any])
CheckF = TypeVar("CheckF", bound=Callable[..., Any])
STEP_ATTRIBUTE = "__bulkops_step__"


class StepKind(enum.StrEnum):
    """How a step completes."""

    PLAIN = "plain"  # done when its action returns
    SIGNAL = "signal"  # done when a signal for the row's key arrives
    POLLING = "polling"  # done when its completion check returns true


@dataclass(frozen=True, slots=True)
class StepSpec:
    """What a decorator or step object declares about one step."""

    name: str
    order: int
    kind: StepKind = StepKind.PLAIN
    max_retries: int = 0
    allow_operation_retry: bool = True
    timeout: float | None = None  # seconds
    poll_interval: float = 0.0  # seconds; zero for signal steps
    key: Callable[[Any, Any], Any] | None = None  # (row, metadata) -> user key
    check_name: str | None = None  # method name of a polling step's completion check
    rate_limit: RateLimit | None = None  # shared by every process running the step


def _rate(text: str | None, name: str) -> RateLimit | None:
    return None if text is None else RateLimit.parse(text, f"Step {name!r}")


def _seconds(value: timedelta | float | None, what: str, *, positive: bool = True) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0 or (positive and seconds == 0):
        raise DefinitionError(f"{what} must be positive")
    return seconds


def _check_common(name: str, order: int, max_retries: int) -> None:
    if not isinstance(name, str) or not name.strip():
        raise DefinitionError("A step name must be a non-empty string")
    if not isinstance(order, int):
        raise DefinitionError(f"Step {name!r}: order must be an integer")
    if not isinstance(max_retries, int) or max_retries < 0:
        raise DefinitionError(f"Step {name!r}: max_retries must be a non-negative integer")


class StepMethod(Generic[F]):
    """A decorated step method. It still behaves as the plain method on instances; a polling
    step also offers ``.check`` to register its completion check."""

    def __init__(self, function: F, spec: StepSpec) -> None:
        self.function = function
        self.spec = spec
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", spec.name)

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = name

    @overload
    def __get__(self, instance: None, owner: type) -> StepMethod[F]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> F: ...

    def __get__(self, instance: object | None, owner: type) -> Any:
        if instance is None:
            return self
        return self.function.__get__(instance, owner)

    def check(self, function: CheckF) -> CheckF:
        """Register the completion check of a polling step: ``(row, metadata) -> bool``."""
        if self.spec.kind is not StepKind.POLLING:
            raise DefinitionError(f"Step {self.spec.name!r} is not a polling step")
        self.spec = replace(self.spec, check_name=function.__name__)
        return function


class UndoMethod(Generic[U]):
    """A method declared by ``@undo_step``: it undoes what a pipeline step did for a row.
    It still behaves as the plain method on instances."""

    def __init__(self, function: U, step_name: str) -> None:
        self.function = function
        self.step_name = step_name
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", step_name)

    @overload
    def __get__(self, instance: None, owner: type) -> UndoMethod[U]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> U: ...

    def __get__(self, instance: object | None, owner: type) -> Any:
        if instance is None:
            return self
        return self.function.__get__(instance, owner)


def undo_step(name: str) -> Callable[[U], UndoMethod[U]]:
    """Declare the method that undoes pipeline step ``name``: ``(self, row, metadata)``,
    sync or async.

    ``POST /api/bulks/{id}/undo`` runs it once for each row that completed that step, with
    the row's data as it was run; a row's undos run in reverse step order.
    ``bulkops.current_row()`` in it says ``undo=True`` and names the step undone.

    Args:
        name: The name of the step it undoes (a step of the same operation).
    """
    if not isinstance(name, str) or not name.strip():
        raise DefinitionError("@undo_step needs the name of the step it undoes")
    return lambda function: UndoMethod(function, name)


def step(
    name: str,
    *,
    order: int = 0,
    max_retries: int = 0,
    allow_operation_retry: bool = True,
    rate_limit: str | None = None,
) -> Callable[[F], StepMethod[F]]:
    """Declare a pipeline step: a method ``(self, row, metadata)``, sync or async.

    Args:
        name: Step name, unique within the operation.
        order: Execution order; steps run by ascending order (ties keep declaration order).
        max_retries: Extra attempts after a failure, with exponential backoff and jitter.
        allow_operation_retry: When False, rows failing here are skipped by operation retry.
        rate_limit: At most this many calls of the step start in any window, across every
            process sharing the database (``"20/s"``, ``"100/m"``, ``"1000/h"``).
    """
    _check_common(name, order, max_retries)
    spec = StepSpec(
        name,
        order,
        StepKind.PLAIN,
        max_retries,
        allow_operation_retry,
        rate_limit=_rate(rate_limit, name),
    )
    return lambda function: StepMethod(function, spec)


def signal_step(
    name: str,
    *,
    order: int = 0,
    key: Callable[[Any, Any], Any],
    timeout: timedelta | float | None = None,
    max_retries: int = 0,
    allow_operation_retry: bool = True,
) -> Callable[[F], StepMethod[F]]:
    """Declare a step that waits for an external signal after its action runs.

    The row's signal key ``{operationId}:{key(row, metadata)}:{rowNumber}`` and its waiting
    state are stored before the action runs, so an early signal is never lost. Signals
    arrive through ``POST /api/bulks/{id}/signal/{key}`` (or ``.../fail``) or the
    programmatic ``SignalService``.

    Args:
        name: Step name.
        order: Execution order.
        key: ``(row, metadata) -> str``, the user part of the row's signal key.
        timeout: How long to wait; on expiry the row fails with error type Timeout.
        max_retries: Extra attempts when the action raises.
        allow_operation_retry: When False, rows failing here are skipped by operation retry.
    """
    _check_common(name, order, max_retries)
    if not callable(key):
        raise DefinitionError(f"Signal step {name!r} needs a callable key(row, metadata)")
    spec = StepSpec(
        name,
        order,
        StepKind.SIGNAL,
        max_retries,
        allow_operation_retry,
        timeout=_seconds(timeout, f"Step {name!r}: timeout"),
        key=key,
    )
    return lambda function: StepMethod(function, spec)


def polling_step(
    name: str,
    *,
    order: int = 0,
    poll_interval: timedelta | float,
    timeout: timedelta | float | None = None,
    max_retries: int = 0,
    allow_operation_retry: bool = True,
) -> Callable[[F], StepMethod[F]]:
    """Declare a step whose completion is polled: after the action, the check registered
    with ``@<step>.check`` runs every ``poll_interval`` until it returns True.

    Args:
        name: Step name.
        order: Execution order.
        poll_interval: Time between checks.
        timeout: How long to poll; on expiry the row fails with error type Timeout.
        max_retries: Extra attempts when the action raises.
        allow_operation_retry: When False, rows failing here are skipped by operation retry.
    """
    _check_common(name, order, max_retries)
    spec = StepSpec(
        name,
        order,
        StepKind.POLLING,
        max_retries,
        allow_operation_retry,
        timeout=_seconds(timeout, f"Step {name!r}: timeout"),
        poll_interval=_seconds(poll_interval, f"Step {name!r}: poll_interval") or 0.0,
    )
    return lambda function: StepMethod(function, spec)


class Step:
    """Base class for a step given as an object (returned by an operation's ``steps()``).

    Set ``name`` and ``order`` (class or instance attributes) and implement ``run``.
    """

    name: str = ""
    order: int = 0
    max_retries: int = 0
    allow_operation_retry: bool = True
    rate_limit: str | None = None

    async def run(self, row: Any, metadata: Any) -> None:
        """The step's action."""
        raise NotImplementedError

    def spec(self) -> StepSpec:
        """The step's declaration."""
        _check_common(self.name, self.order, self.max_retries)
        return StepSpec(
            self.name,
            self.order,
            StepKind.PLAIN,
            self.max_retries,
            self.allow_operation_retry,
            rate_limit=_rate(self.rate_limit, self.name),
        )


class SignalStep(Step):
    """A step object that waits for a signal; implement ``key`` (and ``run``)."""

    timeout: timedelta | float | None = None

    def key(self, row: Any, metadata: Any) -> str:
        """The user part of the row's signal key."""
        raise NotImplementedError

    def spec(self) -> StepSpec:
        """The step's declaration."""
        base = super().spec()
        return replace(
            base,
            kind=StepKind.SIGNAL,
            timeout=_seconds(self.timeout, f"Step {self.name!r}: timeout"),
            key=self.key,
        )


class PollingStep(Step):
    """A step object whose completion is polled; implement ``check`` (and ``run``)."""

    poll_interval: timedelta | float = 1.0
    timeout: timedelta | float | None = None

    async def check(self, row: Any, metadata: Any) -> bool:
        """True once the external work is complete."""
        raise NotImplementedError

    def spec(self) -> StepSpec:
        """The step's declaration."""
        base = super().spec()
        return replace(
            base,
            kind=StepKind.POLLING,
            timeout=_seconds(self.timeout, f"Step {self.name!r}: timeout"),
            poll_interval=_seconds(self.poll_interval, f"Step {self.name!r}: poll_interval") or 0.0,
        )
