"""Application use-cases shared by HTTP, CLI and embedding. No HTTP types live here."""

from __future__ import annotations

from bulkops.service.catalog import CatalogService
from bulkops.service.commands import CommandService
from bulkops.service.feed import FeedService
from bulkops.service.queries import OperationProgress, QueryService
from bulkops.service.signals import SignalService
from bulkops.service.submission import SubmissionService, Upload, ValidationResult

__all__ = [
    "CatalogService",
    "CommandService",
    "FeedService",
    "OperationProgress",
    "QueryService",
    "SignalService",
    "SubmissionService",
    "Upload",
    "ValidationResult",
]
