"""Wake-ups where the database cannot carry them (SQLite, memory): none; polling serves."""

from __future__ import annotations

from collections.abc import Callable


class NoWakeUps:
    """A ``WakeUps`` that never announces or hears anything."""

    async def announce_work(self) -> None:
        """Nothing to do."""

    async def announce_signal(self, key: str) -> None:
        """Nothing to do."""

    async def listen(self, on_work: Callable[[], None], on_signal: Callable[[str], None]) -> None:
        """Return at once: there is nothing to listen to."""
