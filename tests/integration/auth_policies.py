"""Custom policies loaded by ``BULKOPS_*_POLICY`` in the access-control tests."""

from __future__ import annotations

from starlette.requests import Request

from bulkops.api.auth import Principal

SEEN: list[tuple[str | None, str]] = []


def blue_team(principal: Principal | None, request: Request) -> bool:
    """Allows requests that say they come from the blue team (a header set by a proxy)."""
    SEEN.append((principal.name if principal else None, request.url.path))
    return request.headers.get("x-team") == "blue"


async def async_blue_team(principal: Principal | None, request: Request) -> bool:
    """The same, as a coroutine."""
    return blue_team(principal, request)


def only_ci_bot(principal: Principal | None, request: Request) -> bool:
    """Allows the principal named ci-bot, whatever its token's role."""
    return principal is not None and principal.name == "ci-bot"


NOT_CALLABLE = 42
