"""The row being processed, as user code sees it: ``current_row()`` and ``RowContext``.

The engine marks the row (and step) it runs in a context variable; ``current_row()`` reads
it. Context variables follow the code that runs the row: an ``async def`` method in its
task, a ``def`` method in the worker thread it is sent to (the thread gets a copy of the
context), and a row helper process, which marks its rows the same way.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from uuid import UUID

__all__ = ["BATCH", "NO_OPERATION_ID", "RowContext", "RowScope", "current_row", "row_frame"]

# The operation id ``current_row()`` tells ``validate_row`` in the checks of
# ``POST /api/bulks/validate``, which run before any operation exists: the nil UUID, never
# the id of a stored operation.
NO_OPERATION_ID = UUID(int=0)


@dataclass(frozen=True, slots=True)
class RowContext:
    """Where the code that asked (``current_row()``) runs: which operation, row and step.

    In the checks of ``POST /api/bulks/validate`` (which run ``validate_row`` on the first
    rows before any operation exists) it tells the row checked: ``operation_id`` is
    ``UUID(int=0)`` (the nil UUID, never a stored operation's), ``created_by`` the caller,
    ``step_index`` -1, ``attempt`` 1 and ``retry_attempt`` 0, so its ``idempotency_key``
    is no real operation's either.

    Attributes:
        operation_id: The operation's id (``UUID(int=0)`` in ``POST /api/bulks/validate``).
        operation_name: The operation's registered name.
        row_number: The row's number in the file (from 1).
        row_id: The row's business key (``Row.row_id()``), or None when the model has none.
        step_name: The step running: the step's name in a pipeline, ``"process"`` in
            ``process_row``, None in ``validate_row``.
        step_index: The step's zero-based index: 0 in ``process_row``, -1 in
            ``validate_row``.
        attempt: The call's attempt at this step, from 1: a per-step retry adds one. A
            polling step's completion checks see the attempt whose action succeeded.
        retry_attempt: The row's operation-retry round: 0 in the operation's first run, 1
            after the first retry of its failed rows, and so on.
        created_by: Who created the operation (in ``POST /api/bulks/validate``: who
            asked for the check).
        restart: How many times a restart (``fromStep``) has run this row's step again:
            0 until one does.
        idempotency_key: ``"{operation_id}:{row_number}:{step_index}"``: the same for
            every run of this row's step (per-step retries, a run again after a crash, an
            operation retry) and different for any other. Pass it as the Idempotency-Key
            of the downstream call the step makes, so that a call repeated by an
            at-least-once run takes effect once. A step a restart runs again has a new
            key, ``"{operation_id}:{row_number}:{step_index}:r{n}"`` (n: ``restart``),
            so the downstream service does it again. In an undo, the undo operation's id
            with the number and step index of the row's step undone.
        undo: True while an undo runs (``undo_row``, an ``@undo_step`` method): the
            step named is the step being undone.
    """

    operation_id: UUID
    operation_name: str
    row_number: int
    row_id: str | None
    step_name: str | None
    step_index: int
    attempt: int
    retry_attempt: int
    created_by: str
    idempotency_key: str = field(init=False)
    undo: bool = False
    restart: int = 0

    def __post_init__(self) -> None:
        key = f"{self.operation_id}:{self.row_number}:{self.step_index}"
        if self.restart:
            key = f"{key}:r{self.restart}"
        object.__setattr__(self, "idempotency_key", key)


@dataclass(frozen=True, slots=True)
class RowScope:
    """What every row of one operation's run shares (built once per run, not per row)."""

    operation_id: UUID
    operation_name: str
    created_by: str
    undo: bool = False  # the rows of an undo operation


# What the engine marks per row: kept a tuple (no object built per row) and turned into a
# RowContext only when user code asks. (scope, row_number, row_id, step_name, step_index,
# attempt, retry_attempt)
Frame = tuple[RowScope, int, str | None, str | None, int, int, int]

BATCH = "batch"  # marks a ``process_batch`` call: many rows, so no current row

row_frame: ContextVar[Frame | str | None] = ContextVar("bulkops_row", default=None)
# The restart number of the step the pipeline runs (``StepState.restart``; 0: never
# restarted), marked beside the frame so that plain rows pay nothing for it.
row_restart: ContextVar[int] = ContextVar("bulkops_row_restart", default=0)


def current_row() -> RowContext:
    """The row (and step) being processed by the code that calls it.

    Call it inside ``validate_row``, ``process_row``, a pipeline step or a polling step's
    completion check, in ``def`` and ``async def`` methods alike. Its ``idempotency_key``
    is the key to pass to a downstream call, so that the call has its effect once however
    often the row's step runs. In the checks of ``POST /api/bulks/validate``,
    ``validate_row`` sees the row checked with the placeholder operation id
    ``UUID(int=0)`` (see ``RowContext``).

    Raises:
        LookupError: called outside a row: at import, in ``process_batch`` (a batch holds
            many rows: use their fields), in code not run by bulkops for a row.
    """
    frame = row_frame.get()
    if frame is None:
        raise LookupError(
            "bulkops.current_row() was called outside a row: it is available only while "
            "bulkops runs validate_row, process_row, a step or a polling check"
        )
    if isinstance(frame, str):
        raise LookupError(
            "bulkops.current_row() is not available in process_batch: a batch holds many "
            "rows, so there is no current row (use the rows' own fields)"
        )
    scope, row_number, row_id, step_name, step_index, attempt, retry_attempt = frame
    return RowContext(
        operation_id=scope.operation_id,
        operation_name=scope.operation_name,
        row_number=row_number,
        row_id=row_id,
        step_name=step_name,
        step_index=step_index,
        attempt=attempt,
        retry_attempt=retry_attempt,
        created_by=scope.created_by,
        undo=scope.undo,
        restart=row_restart.get(),
    )
