"""Log lines that say which operation they are about, as text or as JSON.

``operation_scope(id)`` marks everything logged from the current task, and the tasks it
starts, with the operation's id (a context variable, so concurrent operations never mix);
``configure("json")`` writes one JSON object per line for log collectors. A process that
is not the one a user started (one of ``serve``'s worker processes) tags its lines with
its name (``configure(tag="worker-1")``).
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]
current_operation: ContextVar[str | None] = ContextVar("bulkops_operation", default=None)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(operation_suffix)s"


def operation_scope(operation_id: object) -> None:
    """Mark the log lines of the current task (and of tasks it starts) with the
    operation's id."""
    current_operation.set(str(operation_id))


class OperationFilter(logging.Filter):
    """Adds ``operation_id`` (or None) and ``operation_suffix`` to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        operation = current_operation.get()
        record.operation_id = operation
        record.operation_suffix = f" [operation {operation}]" if operation else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, operationId, exception
    (and ``process``, the tag of a worker process)."""

    def __init__(self, tag: str | None = None) -> None:
        super().__init__()
        self._tag = tag

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        operation = getattr(record, "operation_id", None)
        if operation:
            entry["operationId"] = operation
        if self._tag:
            entry["process"] = self._tag
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(
    log_format: LogFormat = "text", level: int = logging.INFO, *, tag: str | None = None
) -> None:
    """Send logs to stderr in ``log_format``, each line marked with its operation (and
    with ``tag``, the name of a worker process, when given)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(OperationFilter())
    if log_format == "json":
        handler.setFormatter(JsonFormatter(tag))
    elif tag:
        handler.setFormatter(
            logging.Formatter(TEXT_FORMAT.replace("%(name)s", f"[{tag}] %(name)s"))
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)  # start-up noise
