"""The global event feed across backends, with one integer cursor.

Every backend numbers its own events (its ``sequence``); the numbers of two backends say
nothing about each other, so passing one ``since`` to every backend would skip or repeat
events. The gateway therefore keeps its own merged log and numbers it itself:

* **Intake.** For each backend the log remembers the newest local sequence taken in (its
  *position*). A feed request first pulls every backend's events after its position (each
  within the fan-out timeout; a failing backend is simply pulled again next time), then
  appends the new events to the log, the backends' batches interleaved by timestamp while
  each backend's own order is kept. An event is taken in only if its local sequence is above
  the backend's position at that moment, so concurrent requests never add it twice.
* **Numbering.** An event's gateway sequence is the *sum of all positions* right after it was
  taken in. Every intake raises one position, so the numbers strictly increase, and the
  caller's ``since`` is an index into the log: nothing is delivered twice, nothing skipped.
  With one active backend the numbers equal that backend's own.
* **Start and restarts.** A backend is first read from its newest events (up to 1,000), its
  position starting just before them. Because the sum of positions after taking in every
  event that exists equals the sum of the backends' newest sequences, a restarted gateway
  continues above any number it handed out before: a client that was up to date goes on
  without a gap or a repeat. (Only a client that was behind when the gateway restarted may
  see a few events around that moment again or not at all; clients never stall.)
* **Bounded tail.** The log keeps the newest ``tail`` events. A client further behind
  continues from the oldest kept event: it observes a gap, like an instance's store.
* **Access.** Each caller credential (its ``Authorization`` header as forwarded) has a
  log of its own (``CallerFeeds``): a backend shows a caller with a tenant only that
  tenant's events, so a log shared with another credential would hand one tenant's events
  to another and skip events only the other may see. Requests pull with the caller's own
  credentials, and a backend that refuses the caller (401/403) contributes none of its
  events to that caller's answer. When every backend refuses, the refusal is relayed.

The per-operation feed (``/api/bulks/{id}/events``) is served by the owning backend, with its
own sequence numbers.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bulkops.gateway.backend import Backend
from bulkops.gateway.errors import Refusal, RelayedRefusal
from bulkops.gateway.fanout import fan_out
from bulkops.gateway.merge import interleave_by_time

FEED_PATH = "/api/events"
PULL_LIMIT = 1000  # events per backend request: an instance's largest page
MAX_PULLS = 10  # backend requests per backend and feed request, so one request stays bounded
DEFAULT_TAIL = 10_000
# Caller logs kept at once, and the events each keeps: at most 40,000 events in all. The
# least recently read log is dropped first (a caller coming back starts a fresh log,
# numbered to continue above the numbers it was given before).
MAX_CALLER_LOGS = 16
CALLER_TAIL = 2_500
REFUSED = frozenset({401, 403})

Params = Sequence[tuple[str, str]]


@dataclass(slots=True)
class Pull:
    """What one backend returned: its new events, in its own order."""

    events: list[dict[str, Any]] = field(default_factory=list)
    fresh_start: bool = False  # read from the newest events: the position starts before them


class MergedFeed:
    """The gateway's event log over every backend (see the module docstring).

    Args:
        backends: Every configured backend.
        timeout: Seconds each backend gets to answer a pull.
        tail: Events kept in the log.
    """

    def __init__(
        self, backends: Sequence[Backend], timeout: float, tail: int = DEFAULT_TAIL
    ) -> None:
        self._backends = list(backends)
        self._timeout = timeout
        self._tail = tail
        self._positions: dict[str, int] = {}
        self._sequences: list[int] = []
        self._entries: list[tuple[str, dict[str, Any]]] = []

    @property
    def cursor(self) -> int:
        """The sequence of the newest event taken in (the sum of the positions)."""
        return sum(self._positions.values())

    async def read(self, since: int | None, limit: int, headers: Params) -> list[dict[str, Any]]:
        """Events after ``since`` (exclusive) oldest first, at most ``limit``; without
        ``since`` the newest ``limit``.

        Raises:
            RelayedRefusal: every backend refused the caller.
        """
        answers = await fan_out(self._backends, lambda b: self._pull(b, headers), self._timeout)
        refusals = [a.value for a in answers if isinstance(a.value, Refusal)]
        if refusals and len(refusals) == len(self._backends):
            raise RelayedRefusal(refusals[0])
        refused = {
            a.backend.name
            for a in answers
            if isinstance(a.value, Refusal) and a.value.status_code in REFUSED
        }
        self.take_in({a.backend.name: a.value for a in answers if isinstance(a.value, Pull)})
        return self.select(since, limit, exclude=refused)

    def take_in(self, pulls: dict[str, Pull]) -> None:
        """Append what the backends returned, numbering each event (synchronous, so
        concurrent requests interleave only between whole intakes)."""
        fresh: dict[str, list[dict[str, Any]]] = {}
        for name, pull in pulls.items():
            position = self._positions.get(name)
            if position is None:
                if not pull.fresh_start:
                    continue  # pulled from an older position than the one now recorded
                first = pull.events[0]["sequence"] if pull.events else 1
                position = self._positions[name] = int(first) - 1
            fresh[name] = [e for e in pull.events if int(e["sequence"]) > position]
        for name, event in interleave_by_time(fresh):
            local = int(event["sequence"])
            if local <= self._positions[name]:
                continue
            self._positions[name] = local
            self._sequences.append(self.cursor)
            self._entries.append((name, {**event, "sequence": self.cursor}))
        if len(self._entries) > 2 * self._tail:  # trim in batches: amortised O(1)
            del self._entries[: -self._tail]
            del self._sequences[: -self._tail]

    def select(
        self, since: int | None, limit: int, *, exclude: set[str] | frozenset[str] = frozenset()
    ) -> list[dict[str, Any]]:
        """Events from the log: after ``since`` (oldest first), else the newest ``limit``."""
        if since is None:
            newest = [e for name, e in reversed(self._entries) if name not in exclude]
            return newest[:limit][::-1]
        start = bisect.bisect_right(self._sequences, since)
        found: list[dict[str, Any]] = []
        for name, event in self._entries[start:]:
            if name not in exclude:
                found.append(event)
                if len(found) >= limit:
                    break
        return found

    async def _pull(self, backend: Backend, headers: Params) -> Pull | Refusal:
        position = self._positions.get(backend.name)
        if position is None:
            status, body = await backend.get_json(
                FEED_PATH, params={"limit": PULL_LIMIT}, headers=headers
            )
            if status != 200:
                return Refusal(status, body)
            return Pull(events=list(body), fresh_start=True)
        pull = Pull()
        for _ in range(MAX_PULLS):
            since = int(pull.events[-1]["sequence"]) if pull.events else position
            status, body = await backend.get_json(
                FEED_PATH, params={"since": since, "limit": PULL_LIMIT}, headers=headers
            )
            if status != 200:
                return Refusal(status, body)
            pull.events.extend(body)
            if len(body) < PULL_LIMIT:
                break
        return pull


class CallerFeeds:
    """A ``MergedFeed`` per caller credential (see the module docstring, Access).

    Args:
        backends: Every configured backend.
        timeout: Seconds each backend gets to answer a pull.
        tail: Events kept in each caller's log.
        most: Caller logs kept at once.
    """

    def __init__(
        self,
        backends: Sequence[Backend],
        timeout: float,
        tail: int = CALLER_TAIL,
        most: int = MAX_CALLER_LOGS,
    ) -> None:
        self._backends = list(backends)
        self._timeout = timeout
        self._tail = tail
        self._most = most
        self._logs: OrderedDict[str, MergedFeed] = OrderedDict()

    def log_for(self, headers: Params) -> MergedFeed:
        """The log of the credential in ``headers`` (one for callers without one)."""
        credential = next((v for k, v in headers if k.lower() == "authorization"), "")
        # Kept by digest: the gateway holds no bearer token longer than a request.
        key = hashlib.sha256(credential.encode()).hexdigest()
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = MergedFeed(self._backends, self._timeout, self._tail)
            while len(self._logs) > self._most:
                self._logs.popitem(last=False)
        self._logs.move_to_end(key)
        return log

    async def read(self, since: int | None, limit: int, headers: Params) -> list[dict[str, Any]]:
        """``MergedFeed.read`` on the caller's own log."""
        return await self.log_for(headers).read(since, limit, headers)
