"""The public surface is curated: this pins it so a change is deliberate."""

from __future__ import annotations

import bulkops


def test_exported_members() -> None:
    assert bulkops.__all__ == [
        "BatchOperation",
        "BulkOpsError",
        "ErrorType",
        "GatewaySettings",
        "Metadata",
        "OperationStatus",
        "PipelineOperation",
        "PollingStep",
        "Row",
        "RowContext",
        "RowOperation",
        "RowState",
        "Settings",
        "SignalService",
        "SignalStep",
        "Step",
        "ValidationError",
        "Worker",
        "create_app",
        "create_gateway",
        "current_row",
        "operation",
        "polling_step",
        "signal_step",
        "step",
        "undo_step",
    ]
    for name in bulkops.__all__:
        assert getattr(bulkops, name) is not None
