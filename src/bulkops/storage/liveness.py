"""Liveness where nothing beyond the heartbeat is known (memory storage: one process)."""

from __future__ import annotations

from collections.abc import Collection


class NoLiveness:
    """``Liveness`` that knows neither death nor life: the heartbeat alone decides."""

    def mark(self, worker_id: str) -> str:
        """The id unchanged."""
        return worker_id

    async def keep(self, worker_id: str) -> None:
        """Nothing to keep."""

    async def dead(self) -> set[str]:
        """None known."""
        return set()

    async def alive(self) -> set[str]:
        """None known: the heartbeat alone decides."""
        return set()

    async def expire(self, worker_ids: Collection[str]) -> None:
        """Nothing is ever found dead, so nothing to expire."""
