"""Operation base classes, the ``@operation`` decorator and the resulting definitions."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from bulkops.definition.controls import (
    DEFAULT_BATCH_SIZE,
    OperationControls,
    RateLimit,
    build_controls,
)
from bulkops.definition.fields import FieldDescriptor, describe
from bulkops.definition.models import Metadata, Row, column_name
from bulkops.definition.steps import Step, StepKind, StepMethod, StepSpec, UndoMethod
from bulkops.errors import DefinitionError

M = TypeVar("M", bound=Metadata)
R = TypeVar("R", bound=Row)
C = TypeVar("C", bound=type)

DEFINITION_ATTRIBUTE = "__bulkops_definition__"
PROCESS_STEP = "process"
UNDO_ROW = "undo_row"
VALIDATION_STEP = "validation"


class OperationBase(Generic[M, R]):
    """Behaviour shared by row-based and pipeline operations.

    Subclass ``RowOperation`` or ``PipelineOperation``, not this class. ``retryable`` and
    ``track_row_data`` may be set as class attributes as well as on the decorator.
    """

    retryable: ClassVar[bool] = False
    track_row_data: ClassVar[bool] = False

    async def validate_metadata(self, metadata: M) -> None:
        """Check the metadata as a whole, once per operation, after the create answered 201
        and before any row runs (a dry run too).

        Raise ``bulkops.ValidationError`` (or any exception) to refuse it: the operation
        ends Failed with the message, and no row runs. Default: accept.
        """

    async def validate_row(self, row: R, metadata: M) -> None:
        """Check one row that fits the row model, before any work on it; also at once for a
        fix in place (``PATCH /api/bulks/{id}/rows/{rowNumber}``) and for the first rows
        checked by ``POST /api/bulks/validate``.

        Raise ``bulkops.ValidationError`` to fail the row with error type Validation (it is
        retried only once fixed); any other exception fails it as Processing. Default:
        accept.
        """


class RowOperation(OperationBase[M, R]):
    """An operation that validates and processes each row with one ``process_row`` call."""

    async def process_row(self, row: R, metadata: M) -> None:
        """Do the work for one row. Any exception fails the row (error type Processing)."""
        raise NotImplementedError

    async def undo_row(self, row: R, metadata: M) -> None:
        """Undo what ``process_row`` did for a row (optional; defining it lets a finished
        operation be undone with ``POST /api/bulks/{id}/undo``). It runs once for each
        row that completed, with the row's data as it was run. Any exception fails the
        undo of that row."""
        raise NotImplementedError


class BatchOperation(OperationBase[M, R]):
    """An operation that validates each row, then processes valid rows in batches of
    ``batch_size`` (in file order) with one ``process_batch`` call each."""

    async def process_batch(self, rows: list[R], metadata: M) -> list[str | None] | None:
        """Do the work for a batch of valid rows.

        Return None when every row succeeded, or a list aligned with ``rows`` giving each
        row's failure message (None for a row that succeeded). An exception fails every
        row of the batch (error type Processing, its text as the message).
        """
        raise NotImplementedError

    async def undo_row(self, row: R, metadata: M) -> None:
        """Undo what ``process_batch`` did for one row (optional; defining it lets a
        finished operation be undone). An undo runs row by row: once for each row that
        completed, with its data as it was run."""
        raise NotImplementedError


class PipelineOperation(OperationBase[M, R]):
    """An operation that runs an ordered list of steps for each row.

    Declare steps as methods decorated with ``@bulkops.step``, ``@bulkops.signal_step`` or
    ``@bulkops.polling_step``, and/or return ``bulkops.Step`` objects from ``steps()``; all
    are merged by ``order``.
    """

    def steps(self) -> Sequence[Step]:
        """Steps given as objects (default: none). Must be cheap and always return the same
        names: it is also called once when the operation is registered."""
        return ()


@dataclass(frozen=True, slots=True)
class StepDefinition:
    """One step of a row's processing, in execution order (``index`` is zero-based).

    ``method_name`` names the step's method; None for a step given as an object.
    """

    name: str
    index: int
    method_name: str | None
    order: int = 0
    max_retries: int = 0
    allow_operation_retry: bool = True
    kind: StepKind = StepKind.PLAIN
    timeout: float | None = None
    poll_interval: float = 0.0
    key: Callable[[Any, Any], Any] | None = None
    check_name: str | None = None
    rate_limit: RateLimit | None = None
    undo_name: str | None = None  # the method that undoes the step (``@undo_step``)

    @classmethod
    def of(cls, spec: StepSpec, index: int, method_name: str | None) -> StepDefinition:
        """Build from a declaration."""
        return cls(
            name=spec.name,
            index=index,
            method_name=method_name,
            order=spec.order,
            max_retries=spec.max_retries,
            allow_operation_retry=spec.allow_operation_retry,
            kind=spec.kind,
            timeout=spec.timeout,
            poll_interval=spec.poll_interval,
            key=spec.key,
            check_name=spec.check_name,
            rate_limit=spec.rate_limit,
        )


@dataclass(frozen=True)
class OperationDefinition:
    """Everything the service knows about one registered operation."""

    name: str
    description: str
    operation_class: type[OperationBase[Any, Any]]
    metadata_model: type[Metadata]
    row_model: type[Row]
    retryable: bool
    track_row_data: bool
    is_step_based: bool
    steps: tuple[StepDefinition, ...]
    overrides_validate_metadata: bool
    overrides_validate_row: bool
    overrides_row_id: bool
    controls: OperationControls = field(default_factory=OperationControls)
    undo_row: bool = False  # a row or batch operation defines ``undo_row``

    @property
    def undoable(self) -> bool:
        """Whether the operation defines an undo: ``undo_row``, or an ``@undo_step`` for
        at least one step."""
        return self.undo_row or any(step.undo_name is not None for step in self.steps)

    @property
    def is_batch(self) -> bool:
        """True for a ``BatchOperation``."""
        return self.controls.batch_size is not None

    @property
    def metadata_fields(self) -> list[FieldDescriptor]:
        """Descriptors of the metadata fields (camelCase names)."""
        return describe(self.metadata_model)

    @property
    def file_columns(self) -> list[FieldDescriptor]:
        """Descriptors of the expected file columns."""
        return describe(self.row_model)

    @property
    def columns(self) -> tuple[str, ...]:
        """External column names of the row model, in declaration order."""
        return tuple(column_name(self.row_model, f) for f in self.row_model.model_fields)

    @property
    def required_columns(self) -> tuple[str, ...]:
        """Columns the file must carry in its header."""
        model = self.row_model
        return tuple(
            column_name(model, f) for f, info in model.model_fields.items() if info.is_required()
        )

    def instantiate(self) -> OperationBase[Any, Any]:
        """A fresh instance of the operation class (one per processing run)."""
        return self.operation_class()


def _models(cls: type) -> tuple[type[Metadata], type[Row]]:
    for klass in inspect.getmro(cls):
        for base in getattr(klass, "__orig_bases__", ()):
            origin = get_origin(base)
            if isinstance(origin, type) and issubclass(origin, OperationBase):
                args = get_args(base)
                if len(args) == 2 and all(isinstance(a, type) for a in args):
                    meta, row = args
                    if issubclass(meta, Metadata) and issubclass(row, Row):
                        return meta, row
    raise DefinitionError(
        f"{cls.__name__} must subclass RowOperation[MetadataModel, RowModel] or "
        "PipelineOperation[MetadataModel, RowModel] with bulkops.Metadata and bulkops.Row models"
    )


def _overrides(cls: type, method: str, base: type) -> bool:
    return getattr(cls, method, None) is not getattr(base, method, None)


def _declared_steps(cls: type) -> list[tuple[StepSpec, str | None]]:
    methods: dict[str, StepSpec] = {}
    for klass in reversed(inspect.getmro(cls)):
        for attribute, value in vars(klass).items():
            if isinstance(value, StepMethod):
                methods[attribute] = value.spec
    found: list[tuple[StepSpec, str | None]] = [(spec, attr) for attr, spec in methods.items()]
    if _overrides(cls, "steps", PipelineOperation):
        try:
            objects = list(cls().steps())
        except Exception as exc:
            raise DefinitionError(f"{cls.__name__}.steps() failed: {exc}") from exc
        for item in objects:
            if not isinstance(item, Step):
                raise DefinitionError(f"{cls.__name__}.steps() must return bulkops.Step objects")
            found.append((item.spec(), None))
    return found


def _undo_methods(cls: type, name: str, steps: tuple[StepDefinition, ...]) -> dict[str, str]:
    """Step index -> the name of the method undoing it, from ``@undo_step`` declarations."""
    declared: dict[str, UndoMethod[Any]] = {}
    for klass in reversed(inspect.getmro(cls)):
        for attribute, value in vars(klass).items():
            if isinstance(value, UndoMethod):
                declared[attribute] = value
    by_name = {step.name.casefold(): step for step in steps}
    found: dict[str, str] = {}
    for attribute, method in declared.items():
        target = by_name.get(method.step_name.casefold())
        if target is None:
            known = ", ".join(repr(step.name) for step in steps)
            raise DefinitionError(
                f"Operation {name!r}: @undo_step({method.step_name!r}) names no step "
                f"(steps: {known})"
            )
        if target.name in found:
            raise DefinitionError(
                f"Operation {name!r}: step {target.name!r} has two @undo_step methods"
            )
        found[target.name] = attribute
    return found


def _pipeline_steps(cls: type, name: str) -> tuple[StepDefinition, ...]:
    declared = _declared_steps(cls)
    if not declared:
        raise DefinitionError(f"Pipeline operation {name!r} declares no steps")
    seen: set[str] = set()
    for spec, method in declared:
        key = spec.name.casefold()
        if key in seen:
            raise DefinitionError(f"Operation {name!r} has two steps named {spec.name!r}")
        seen.add(key)
        if spec.kind is StepKind.POLLING and spec.check_name is None and method is not None:
            raise DefinitionError(
                f"Polling step {spec.name!r} needs a completion check (@{method}.check)"
            )
    ordered = sorted(declared, key=lambda item: item[0].order)  # stable: ties keep order
    steps = tuple(
        StepDefinition.of(spec, index, method) for index, (spec, method) in enumerate(ordered)
    )
    undos = _undo_methods(cls, name, steps)
    return tuple(replace(step, undo_name=undos.get(step.name)) for step in steps)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise DefinitionError("An operation name must be a non-empty string")
    if "/" in name or name != name.strip():
        raise DefinitionError(f"Operation name {name!r} must not contain '/' or edge spaces")
    return name


def _kind(cls: type, name: str) -> tuple[tuple[StepDefinition, ...], bool, str]:
    """The steps, whether step-based, and the kind ("row", "batch" or "pipeline")."""
    if issubclass(cls, RowOperation):
        if not _overrides(cls, "process_row", RowOperation):
            raise DefinitionError(f"Operation {name!r} must define process_row")
        return (StepDefinition(PROCESS_STEP, 0, "process_row"),), False, "row"
    if issubclass(cls, BatchOperation):
        if not _overrides(cls, "process_batch", BatchOperation):
            raise DefinitionError(f"Operation {name!r} must define process_batch")
        return (StepDefinition(PROCESS_STEP, 0, "process_batch"),), False, "batch"
    if issubclass(cls, PipelineOperation):
        return _pipeline_steps(cls, name), True, "pipeline"
    raise DefinitionError(
        f"{cls.__name__} must subclass RowOperation, BatchOperation or PipelineOperation"
    )


_KINDS: dict[str, type] = {"row": RowOperation, "batch": BatchOperation}


def _check_undo(cls: type, name: str, kind: str) -> None:
    """Each kind declares its undo one way: ``undo_row``, or ``@undo_step`` in a pipeline."""
    if kind == "pipeline" and callable(getattr(cls, UNDO_ROW, None)):
        raise DefinitionError(
            f"Operation {name!r}: a pipeline undoes its steps with @bo.undo_step, not undo_row"
        )
    if kind != "pipeline" and any(
        isinstance(value, UndoMethod)
        for klass in inspect.getmro(cls)
        for value in vars(klass).values()
    ):
        raise DefinitionError(
            f"Operation {name!r}: @bo.undo_step undoes a pipeline step; define undo_row instead"
        )


def build_definition(
    cls: type,
    name: str,
    *,
    description: str = "",
    retryable: bool | None = None,
    track_row_data: bool | None = None,
    tolerated_failure_count: int | None = None,
    tolerated_failure_percentage: float | None = None,
    batch_size: int | None = None,
    rate_limit: str | None = None,
    csv_delimiter: str | None = None,
    schema_version: str | None = None,
) -> OperationDefinition:
    """Inspect an operation class and build its definition (raises ``DefinitionError``)."""
    if not (isinstance(cls, type) and issubclass(cls, OperationBase)):
        raise DefinitionError(f"@operation decorates RowOperation subclasses, not {cls!r}")
    metadata_model, row_model = _models(cls)
    steps, step_based, kind = _kind(cls, name)
    _check_undo(cls, name, kind)
    if kind == "batch":
        batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    elif batch_size is not None:
        raise DefinitionError(f"Operation {name!r}: batch_size needs a BatchOperation")
    controls = build_controls(
        name,
        tolerated_failure_count=tolerated_failure_count,
        tolerated_failure_percentage=tolerated_failure_percentage,
        batch_size=batch_size,
        rate_limit=rate_limit,
        csv_delimiter=csv_delimiter,
        schema_version=schema_version,
    )
    return OperationDefinition(
        name=_check_name(name),
        description=description or (inspect.getdoc(cls) or "").split("\n\n")[0],
        operation_class=cls,
        metadata_model=metadata_model,
        row_model=row_model,
        retryable=bool(retryable) or bool(getattr(cls, "retryable", False)),
        track_row_data=bool(track_row_data) or bool(getattr(cls, "track_row_data", False)),
        is_step_based=step_based,
        steps=steps,
        overrides_validate_metadata=_overrides(cls, "validate_metadata", OperationBase),
        overrides_validate_row=_overrides(cls, "validate_row", OperationBase),
        overrides_row_id=_overrides(row_model, "row_id", Row),
        controls=controls,
        undo_row=kind != "pipeline" and _overrides(cls, UNDO_ROW, _KINDS[kind]),
    )


def operation(
    name: str,
    *,
    description: str = "",
    retryable: bool | None = None,
    track_row_data: bool | None = None,
    tolerated_failure_count: int | None = None,
    tolerated_failure_percentage: float | None = None,
    batch_size: int | None = None,
    rate_limit: str | None = None,
    csv_delimiter: str | None = None,
    schema_version: str | None = None,
) -> Callable[[C], C]:
    """Register a class as a named bulk operation.

    Args:
        name: Unique operation name (case-insensitive), used when creating operations.
        description: Human text for discovery; defaults to the class docstring's first
            paragraph.
        retryable: Allow retrying failed rows (also settable as a class attribute).
        track_row_data: Keep each row's data with its record so it can be retried and
            exported without re-reading the file (also settable as a class attribute).
        tolerated_failure_count: Once more rows than this failed, no further row starts
            and the operation ends Failed.
        tolerated_failure_percentage: The same as a percentage of the file's rows.
        batch_size: Valid rows per ``process_batch`` call (``BatchOperation`` only;
            default 100).
        rate_limit: At most this many ``process_row`` / ``process_batch`` calls start in
            any window, across every process sharing the database: ``"20/s"``, ``"100/m"``,
            ``"1000/h"``.
        csv_delimiter: The CSV delimiter (``,``, ``;``, tab or ``|``); default: detected
            from the header line.
        schema_version: A version of the row definition, shown in discovery and stored on
            each operation.

    Returns:
        A class decorator that validates the class and attaches its definition.
    """

    def decorate(cls: C) -> C:
        definition = build_definition(
            cls,
            name,
            description=description,
            retryable=retryable,
            track_row_data=track_row_data,
            tolerated_failure_count=tolerated_failure_count,
            tolerated_failure_percentage=tolerated_failure_percentage,
            batch_size=batch_size,
            rate_limit=rate_limit,
            csv_delimiter=csv_delimiter,
            schema_version=schema_version,
        )
        setattr(cls, DEFINITION_ATTRIBUTE, definition)
        return cls

    return decorate


def definition_of(obj: object) -> OperationDefinition | None:
    """The definition attached by ``@operation`` to a class, or None."""
    found = getattr(obj, DEFINITION_ATTRIBUTE, None) if isinstance(obj, type) else None
    if isinstance(found, OperationDefinition) and found.operation_class is obj:
        return found
    return None
