"""Calling every backend at once, each within its own deadline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import httpx

from bulkops.gateway.backend import Backend, BackendFailure

T = TypeVar("T")

log = logging.getLogger("bulkops.gateway")


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    """What one backend contributed to a fan-out: a value, or why it contributed nothing."""

    backend: Backend
    value: T | None = None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """The backend answered in time."""
        return self.failure is None


async def _one(
    backend: Backend, call: Callable[[Backend], Awaitable[T]], timeout: float
) -> Answer[T]:
    try:
        async with asyncio.timeout(timeout):
            return Answer(backend, value=await call(backend))
    except TimeoutError:
        reason = f"backend {backend.name!r} did not answer within {timeout:g} s"
    except BackendFailure as exc:
        reason = str(exc)
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:  # a malformed answer
        reason = f"backend {backend.name!r} gave an unusable answer: {exc}"
    log.warning("Fan-out: %s; it contributes nothing", reason)
    return Answer(backend, failure=reason)


async def fan_out(
    backends: Sequence[Backend], call: Callable[[Backend], Awaitable[T]], timeout: float
) -> list[Answer[T]]:
    """Call every backend concurrently; each gets ``timeout`` seconds.

    A backend that fails or is too slow yields a failure answer and the others are still
    served. Cancelling the caller cancels every backend call.
    """
    return list(await asyncio.gather(*(_one(b, call, timeout) for b in backends)))


async def first_match(
    backends: Sequence[Backend],
    call: Callable[[Backend], Awaitable[T]],
    timeout: float,
    accept: Callable[[T], bool],
) -> tuple[Answer[T] | None, list[Answer[T]]]:
    """Call every backend concurrently and stop at the first accepted answer.

    Returns:
        The first accepted answer (the calls still running are cancelled) or None, and every
        answer that arrived (all of them when none was accepted).
    """
    tasks = [asyncio.ensure_future(_one(b, call, timeout)) for b in backends]
    answers: list[Answer[T]] = []
    try:
        for next_done in asyncio.as_completed(tasks):
            answer = await next_done
            answers.append(answer)
            if answer.ok and accept(answer.value):  # type: ignore[arg-type]
                return answer, answers
        return None, answers
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
