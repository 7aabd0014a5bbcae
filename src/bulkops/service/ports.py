"""What the use-cases need from the engine, as ports the engine's objects fill."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

__all__ = ["WorkQueue"]


class WorkQueue(Protocol):
    """Where a create or a retry hands its operation on to be processed: the engine's
    scheduler in a processing instance, the announcer to the workers in an API-only one."""

    def enqueue(self, operation_id: UUID) -> None:
        """Ask for an operation to be processed soon (duplicates are ignored)."""
