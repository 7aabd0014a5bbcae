"""Scenario 9's operations: one per backend, so the gateway sees no duplicate names."""

from __future__ import annotations

import bulkops as bo


class GatewayMeta(bo.Metadata):
    """Nothing required: uploads send ``{}``."""


class GatewayRow(bo.Row):
    """One name."""

    name: str


class _Nothing(bo.RowOperation[GatewayMeta, GatewayRow]):
    async def process_row(self, row: GatewayRow, metadata: GatewayMeta) -> None:
        """Nothing to do (the backends run in the API role anyway)."""


@bo.operation("gateway-a", description="Served by backend a")
class GatewayA(_Nothing):
    """Backend a's operation."""


@bo.operation("gateway-b", description="Served by backend b")
class GatewayB(_Nothing):
    """Backend b's operation."""


@bo.operation("gateway-c", description="Served by backend c")
class GatewayC(_Nothing):
    """Backend c's operation."""
