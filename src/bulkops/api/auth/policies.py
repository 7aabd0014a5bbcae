"""Policies: callables that decide whether a request may read or operate."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from bulkops.api.auth.errors import AuthConfigurationError
from bulkops.api.auth.principal import Access, Principal

Policy = Callable[[Principal | None, Request], Any]
"""``policy(principal, request)`` returns (or, when async, resolves to) a truthy value to
allow the request. ``principal`` is the caller a bearer credential proved, else None."""


def grant_policy(access: Access) -> Policy:
    """The built-in policy: the credential's role or scopes must grant ``access``."""

    def allows(principal: Principal | None, request: Request) -> bool:
        return principal is not None and principal.may(access)

    allows.__name__ = f"requires_{access.value}"
    return allows


def load_policy(spec: str) -> Policy:
    """Import a custom policy named ``module:callable`` (``callable`` may be dotted).

    Raises:
        AuthConfigurationError: The module or attribute cannot be found, or is not callable.
    """
    policy: Policy = load_callable(spec, "policy")
    return policy


def load_callable(spec: str, what: str) -> Callable[..., Any]:
    """Import the callable named ``module:callable`` (``callable`` may be dotted); ``what``
    names it in errors (``policy``, ``tenant resolver``).

    Raises:
        AuthConfigurationError: The module or attribute cannot be found, or is not callable.
    """
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise AuthConfigurationError(f"Cannot load the {what} {spec!r}: {exc}") from None
    if not callable(target):
        raise AuthConfigurationError(f"The {what} {spec!r} is not callable")
    found: Callable[..., Any] = target
    return found


async def evaluate(policy: Policy, principal: Principal | None, request: Request) -> bool:
    """Run a sync or async policy and read its answer as allow (truthy) or deny."""
    answer = policy(principal, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)
