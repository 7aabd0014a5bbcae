"""The benchmark's own operations, loaded into the service with ``--operations``."""

from __future__ import annotations

from datetime import date

from pydantic import Field

import bulkops as bo

BENCH_ROWS = "bench-rows"


class BenchMeta(bo.Metadata):
    """Metadata with nothing required: uploads send ``{}``."""

    note: str | None = None


class BenchRow(bo.Row):
    """One generated person; the reference loop validates with this same class."""

    name: str
    email: str
    age: int
    department: str
    start_date: date = Field(alias="startDate")


@bo.operation(BENCH_ROWS, description="Validates each row and does nothing else")
class BenchRows(bo.RowOperation[BenchMeta, BenchRow]):
    """A row operation whose ``process_row`` is empty: the cost measured is bulkops' own."""

    async def process_row(self, row: BenchRow, metadata: BenchMeta) -> None:
        """Nothing to do."""
