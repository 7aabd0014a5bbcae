"""Access errors: 401 without a valid credential, 403 without the right, 503 without keys."""

from __future__ import annotations

from bulkops.errors import BulkOpsError, ServiceError


class NotAuthenticated(ServiceError):
    """No credential, or one that is not valid (401 with ``WWW-Authenticate: Bearer``).

    Attributes:
        challenge: The ``WWW-Authenticate`` value (RFC 6750): plain ``Bearer`` when no
            credential came, with ``error="invalid_token"`` when a bad one did.
    """

    status_code = 401

    def __init__(self, message: str, *, invalid_token: bool = False) -> None:
        super().__init__(message)
        self.challenge = 'Bearer error="invalid_token"' if invalid_token else "Bearer"


class PermissionDenied(ServiceError):
    """A valid credential that lacks the right the request needs (403)."""

    status_code = 403


class KeysUnavailable(ServiceError):
    """The JWKS endpoint cannot be reached and no keys are cached (503)."""

    status_code = 503


class AuthConfigurationError(BulkOpsError):
    """An access-control setting cannot be used (raised when the app is built)."""
