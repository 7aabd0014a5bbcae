"""Calling user code that may be ``def`` or ``async def``."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any


@functools.lru_cache(maxsize=1024)
def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function)


async def invoke(method: Callable[..., Any], *args: Any) -> Any:
    """Await an ``async def``; run a plain ``def`` in a worker thread so it cannot block
    the event loop."""
    underlying = getattr(method, "__func__", method)
    if _is_async(underlying):
        return await method(*args)
    return await asyncio.to_thread(method, *args)


def direct_call(method: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """An awaitable version of ``method`` decided once: the coroutine function itself, or a
    wrapper that runs a plain ``def`` in a worker thread. Saves ``invoke``'s per-call checks
    on hot paths."""
    if _is_async(getattr(method, "__func__", method)):
        return method

    async def in_thread(*args: Any) -> Any:
        return await asyncio.to_thread(method, *args)

    return in_thread


def error_text(exc: BaseException) -> str:
    """A non-empty human message for an exception raised by user code."""
    text = str(exc).strip()
    return text or type(exc).__name__
