"""What a channel is: a name and an async ``send``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bulkops.storage.records import DeliveryRecord


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt went: delivered, or why not and whether trying again can help."""

    delivered: bool
    status_code: int | None = None
    error: str | None = None
    retry: bool = True  # False: give up at once (e.g. a refused target)


class Channel(Protocol):
    """Sends deliveries of one kind (``name`` is what recipients name as ``channel``)."""

    name: str

    async def send(self, delivery: DeliveryRecord) -> Outcome:
        """Attempt one delivery; never raises for a failed attempt."""
