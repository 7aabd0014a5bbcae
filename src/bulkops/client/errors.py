"""The error every refused or failed request raises."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An HTTP answer other than 2xx: its status code and error body.

    ``message`` is the server's ``error`` text when the body has one, else the raw body;
    ``reason`` the server's ``reason`` (a refused retry says why); ``errors`` the server's
    list of problems (a refused row fix names each one), empty when it sent none. A request
    that never got an answer (the server unreachable) raises ``ApiError`` with
    ``status_code`` 0.
    """

    def __init__(self, status_code: int, body: Any, message: str | None = None) -> None:
        self.status_code = status_code
        self.body = body
        if message is None:
            message = body.get("error") if isinstance(body, dict) else None
            message = str(message if message is not None else body or "no answer")
        self.message = message
        self.reason: str | None = body.get("reason") if isinstance(body, dict) else None
        listed = body.get("errors") if isinstance(body, dict) else None
        self.errors: list[str] = [str(e) for e in listed] if isinstance(listed, list) else []
        super().__init__(f"{status_code}: {message}" if status_code else message)

    @property
    def refused(self) -> bool:
        """The server refused the request (4xx): retrying it unchanged will not help."""
        return 400 <= self.status_code < 500
