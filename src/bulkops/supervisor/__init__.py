"""``serve``'s worker processes: processing beside the HTTP process, one process per core.

``WorkerProcesses`` (the HTTP process's side) starts them, restarts one that dies and
stops them with ``serve``; ``child`` is what each of them runs, tied to ``serve`` by its
``lifeline`` so that it never outlives it.
"""

from __future__ import annotations

from bulkops.supervisor.processes import WorkerProcesses

__all__ = ["WorkerProcesses"]
