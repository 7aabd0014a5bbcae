"""Sending the outbox: claim due deliveries, send each through its channel, record how it
went, and try again with backoff for up to an hour. Runs beside processing, never in it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import timedelta

from bulkops.channels.base import Channel, Outcome
from bulkops.clock import utcnow
from bulkops.errors import StorageError
from bulkops.storage.ports import DeliveryStore
from bulkops.storage.records import DeliveryRecord
from bulkops.storage.states import DeliveryState

log = logging.getLogger("bulkops.channels")

RETRY_FOR = timedelta(hours=1)
FIRST_DELAY = 2.0  # seconds before the second attempt; doubles, at most MAX_DELAY
MAX_DELAY = 300.0
LEASE = timedelta(minutes=2)  # a claimer that died releases its claims after this
BATCH = 20


def next_delay(attempts: int, first: float = FIRST_DELAY) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones."""
    return float(min(first * 2.0 ** max(attempts - 1, 0), MAX_DELAY))


class Dispatcher:
    """Delivers the outbox of the shared storage; every process that processes work runs
    one (claims keep them from sending a delivery twice at once)."""

    def __init__(
        self,
        store: DeliveryStore,
        channels: Mapping[str, Channel],
        claimer: str,
        *,
        poll_interval: float = 1.0,
        first_delay: float = FIRST_DELAY,
    ) -> None:
        self._store = store
        self._channels = channels
        self._claimer = claimer
        self._poll_interval = poll_interval
        self._first_delay = first_delay

    async def run(self) -> None:
        """Send due deliveries until cancelled."""
        while True:
            try:
                sent = await self.send_due()
            except StorageError as exc:
                log.warning("Notification outbox unavailable (%s); will try again", exc)
                sent = 0
            if sent < BATCH:
                await asyncio.sleep(self._poll_interval)

    async def send_due(self) -> int:
        """One round: claim due deliveries and attempt each; returns how many."""
        now = utcnow()
        claimed = await self._store.claim_deliveries(self._claimer, now, now + LEASE, BATCH)
        await asyncio.gather(*(self._attempt(delivery) for delivery in claimed))
        return len(claimed)

    async def _attempt(self, delivery: DeliveryRecord) -> None:
        channel = self._channels.get(delivery.channel)
        if channel is None:
            outcome = Outcome(False, error=f"No channel {delivery.channel!r} here", retry=True)
        else:
            try:
                outcome = await channel.send(delivery)
            except Exception as exc:  # a plug-in's defect must not stop the dispatcher
                outcome = Outcome(False, error=f"{type(exc).__name__}: {exc}"[:500])
        now = utcnow()
        attempts = delivery.attempts + 1
        state, retry_at = DeliveryState.DELIVERED, None
        if not outcome.delivered:
            retry_at = now + timedelta(seconds=next_delay(attempts, self._first_delay))
            if not outcome.retry or retry_at - delivery.created_at > RETRY_FOR:
                state, retry_at = DeliveryState.FAILED, None
            else:
                state = DeliveryState.PENDING
            log.warning(
                "Notification %s to %s failed (attempt %d): %s",
                delivery.id,
                delivery.target,
                attempts,
                outcome.error or outcome.status_code,
            )
        await self._store.record_attempt(
            delivery.id,
            self._claimer,
            state=state,
            now=now,
            status_code=outcome.status_code,
            error=outcome.error,
            next_attempt_at=retry_at,
        )
