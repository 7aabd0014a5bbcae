"""A typed Python client of the bulkops HTTP API (httpx).

``AsyncClient`` for async code and ``Client`` for the rest, with one method per route
(named after its operationId in snake_case) and helpers to submit a file, wait for the end,
page through failed rows and follow the event feed::

    from bulkops.client import Client

    with Client("http://127.0.0.1:8000", token="...") as bulkops:
        operation_id = bulkops.submit("import-users", "users.csv", {"requestedBy": "me"})
        final = bulkops.wait(operation_id, on_progress=print)
        for row in bulkops.iter_errors(operation_id):
            print(row.row_number, row.error_message)

A dry run (``submit(..., dry_run=True)``) validates every row and processes none; a failed
row is corrected in place with ``fix_bulk_row(id, row_number, row_data)``, and
``submit(name, source_operation_id=id)`` runs the same file again with its fixes applied.

Every answer other than 2xx raises ``ApiError`` with its status code and error body.
"""

from bulkops.client.action_models import Action, ActionDetail, ActionItem, ActionPreview
from bulkops.client.async_client import AsyncClient
from bulkops.client.errors import ApiError
from bulkops.client.models import (
    CreateResult,
    Event,
    Operation,
    OperationDescriptor,
    Page,
    RetryEligibility,
    RetryHistoryItem,
    RetryResult,
    RowError,
    RowProgress,
    SavedMapping,
    SignalResult,
    StatusView,
    UndoPreview,
    Usage,
    UsageDay,
    ValidationResult,
)
from bulkops.client.sync_client import Client
from bulkops.wire import ErrorType, OperationStatus, RowState

__all__ = [
    "Action",
    "ActionDetail",
    "ActionItem",
    "ActionPreview",
    "ApiError",
    "AsyncClient",
    "Client",
    "CreateResult",
    "ErrorType",
    "Event",
    "Operation",
    "OperationDescriptor",
    "OperationStatus",
    "Page",
    "RetryEligibility",
    "RetryHistoryItem",
    "RetryResult",
    "RowError",
    "RowProgress",
    "RowState",
    "SavedMapping",
    "SignalResult",
    "StatusView",
    "UndoPreview",
    "Usage",
    "UsageDay",
    "ValidationResult",
]
