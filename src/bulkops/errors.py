"""The exception tree of bulkops.

Every error the library raises on purpose derives from ``BulkOpsError``::

    BulkOpsError
    ├── DefinitionError          an operation class or registry is malformed (at load time)
    ├── ValidationError          a row or metadata failed validation (raised by user code too)
    ├── FileFormatError          a stored file cannot be read as a whole
    ├── StorageError             a storage backend failed (driver errors are translated into it)
    │   ├── StorageUnavailable   it could not be reached or was busy: trying again may work
    │   │   └── StorageFull      it has no room left (a full disk): 507 to an upload
    │   └── ConcurrencyConflict  a conditional write lost against another writer
    ├── IllegalTransition        a status change the transition table forbids
    └── ServiceError             a use-case refused a request (mapped to HTTP by the API)
        ├── NotFound             404
        ├── BadRequest           400
        ├── Unprocessable        422 (carries a validation result)
        ├── UnsupportedMediaType 415
        ├── PayloadTooLarge      413
        ├── Conflict             409
        ├── TooManyRequests      429 (with Retry-After)
        └── BadGateway           502 (a source the service reads for the caller failed)

Driver exceptions (SQLAlchemy, psycopg, obstore) never leave the storage adapters.
"""

from __future__ import annotations

from typing import Any


class BulkOpsError(Exception):
    """Root of every error bulkops raises on purpose."""


class DefinitionError(BulkOpsError):
    """An operation definition or the registry is malformed."""


class ValidationError(BulkOpsError):
    """A row or its metadata is invalid.

    Raise it from ``validate_row`` or ``validate_metadata`` to record a validation failure
    (error type ``Validation``, never retried). Any other exception counts as a processing
    failure.
    """


class FileFormatError(BulkOpsError):
    """A stored file cannot be read as a whole (wrong format, missing columns, bad encoding)."""

    def __init__(self, message: str, row_number: int | None = None) -> None:
        super().__init__(message)
        self.row_number = row_number


class StorageError(BulkOpsError):
    """A storage backend failed."""


class StorageUnavailable(StorageError):
    """The backend could not be reached, or was locked or busy; the same call may succeed
    later (the engine retries these with backoff)."""


class StorageFull(StorageUnavailable):
    """The backend has no room left (a full disk): nothing was stored, and the same call may
    succeed once room is made."""


class ConcurrencyConflict(StorageError):
    """A write conditioned on a concurrency token found the record changed."""


class IllegalTransition(BulkOpsError):
    """A status change that the transition table does not allow."""


class ServiceError(BulkOpsError):
    """A use-case refused a request; ``status_code`` says how HTTP reports it."""

    status_code = 400

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


class NotFound(ServiceError):
    """The named resource does not exist."""

    status_code = 404


class BadRequest(ServiceError):
    """The request is malformed."""

    status_code = 400


class Unprocessable(ServiceError):
    """The request is well formed but its content is invalid."""

    status_code = 422


class UnsupportedMediaType(ServiceError):
    """The uploaded file is not CSV, JSON or JSON Lines."""

    status_code = 415


class PayloadTooLarge(ServiceError):
    """The upload exceeds the configured limit."""

    status_code = 413


class Conflict(ServiceError):
    """The resource's current state forbids the request."""

    status_code = 409


class TooManyRequests(ServiceError):
    """A limit refuses the request for now (429); try again after ``retry_after`` seconds
    (sent as ``Retry-After``)."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.retry_after = retry_after


class BadGateway(ServiceError):
    """A source the service reads on the caller's behalf (a ``sourceUrl``) could not be
    read: unreachable, failing, or answering an error."""

    status_code = 502
