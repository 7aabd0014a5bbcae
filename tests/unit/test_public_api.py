"""The public surface is curated: this pins it so a change is deliberate."""

from __future__ import annotations

import bulkops


def test_exported_members() -> None:
    assert bulkops.__all__ == [
        "BulkOpsError",
        "ErrorType",
        "Metadata",
        "OperationStatus",
        "Row",
        "RowOperation",
        "RowState",
        "Settings",
        "ValidationError",
        "Worker",
        "create_app",
        "operation",
    ]
    for name in bulkops.__all__:
        assert getattr(bulkops, name) is not None
