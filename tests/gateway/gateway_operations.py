"""Operations served by the backends of the gateway tests: each backend gets its own."""

from __future__ import annotations

from datetime import timedelta

import bulkops as bo


class Meta(bo.Metadata):
    pass


class Item(bo.Row):
    name: str


class _Imports(bo.RowOperation[Meta, Item]):
    async def process_row(self, row: Item, metadata: Meta) -> None:
        if row.name.startswith("fail"):
            raise RuntimeError(f"{row.name} failed on purpose")


@bo.operation(
    "alpha-import", description="Served by backend a", retryable=True, track_row_data=True
)
class AlphaImport(_Imports):
    pass


@bo.operation("beta-import", description="Served by backend b")
class BetaImport(_Imports):
    pass


@bo.operation("gamma-import", description="Served by backend c")
class GammaImport(_Imports):
    pass


@bo.operation("beta-approval", description="Waits for a signal keyed by the row's name")
class BetaApproval(bo.PipelineOperation[Meta, Item]):
    @bo.signal_step("Approve", order=1, key=lambda row, md: row.name, timeout=timedelta(minutes=2))
    async def ask(self, row: Item, metadata: Meta) -> None:
        pass

    @bo.step("Done", order=2)
    async def done(self, row: Item, metadata: Meta) -> None:
        pass


# The operations of each backend name used by the tests.
SERVED = {
    "a": [AlphaImport],
    "b": [BetaImport, BetaApproval],
    "c": [GammaImport],
}
OPERATION_OF = {"a": "alpha-import", "b": "beta-import", "c": "gamma-import"}
