"""Errors the gateway answers with, on top of the instance's error tree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bulkops.errors import ServiceError


class BackendUnavailable(ServiceError):
    """No backend could serve the request: 502 unreachable, 503 circuit open or nobody
    answered, 504 timed out."""

    def __init__(self, message: str, status_code: int = 503) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True, slots=True)
class Refusal:
    """A backend's client-error answer (4xx) to a fanned-out request, kept to be relayed when
    no backend accepted the request (e.g. every backend found the query malformed)."""

    status_code: int
    body: Any


class RelayedRefusal(Exception):
    """Answer the caller with a backend's refusal as it is."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(f"backend refused with {refusal.status_code}")
        self.refusal = refusal
