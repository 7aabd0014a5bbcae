"""Rows fixed in place on SQL: the row's new data and its fix, in one transaction."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, select, update

from bulkops.storage.records import RowRecord
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.codec import row_from_mapping
from bulkops.storage.sql.pages import in_states
from bulkops.storage.sql.schema import row_fixes, row_records
from bulkops.storage.states import RowState

_CHUNK = 5_000  # row numbers per IN list, well under every database's parameter limit


class FixMethods(SqlBase):
    """The fixes part of ``SqlStore`` (``RowStore.fix_row`` and ``RowStore.fixes``)."""

    async def fix_row(
        self, operation_id: UUID, row_number: int, row_data: dict[str, Any], now: datetime
    ) -> RowRecord | None:
        """Replace the data of a Failed row and record its fix; see ``RowStore.fix_row``."""
        r, f = row_records.c, row_fixes.c
        key = (r.operation_id == operation_id, r.row_number == row_number)
        lookup = self._db.dialect.for_update(select(row_records).where(*key))
        async with self._db.write() as conn:
            found = (await conn.execute(lookup)).mappings().one_or_none()
            if found is None:
                return None
            row = row_from_mapping(found)
            if row.state is not RowState.FAILED:
                return None
            await conn.execute(update(row_records).where(*key).values(row_data=row_data))
            await conn.execute(
                row_fixes.delete().where(f.operation_id == operation_id, f.row_number == row_number)
            )
            await conn.execute(
                row_fixes.insert().values(
                    operation_id=operation_id,
                    row_number=row_number,
                    row_data=row_data,
                    fixed_at=now,
                )
            )
        row.row_data = row_data
        return row

    async def fixes(
        self,
        operation_id: UUID,
        *,
        row_numbers: Collection[int] | None = None,
        failed_only: bool = False,
    ) -> dict[int, dict[str, Any]]:
        """The data of the operation's fixed rows by row number; see ``RowStore.fixes``."""
        f, r = row_fixes.c, row_records.c
        base: list[ColumnElement[bool]] = [f.operation_id == operation_id]
        stmt = select(f.row_number, f.row_data)
        if failed_only:
            stmt = stmt.join(
                row_records, (r.operation_id == f.operation_id) & (r.row_number == f.row_number)
            )
            base.extend(in_states((RowState.FAILED,)))
        chunks: list[list[int] | None] = [None]
        if row_numbers is not None:
            numbers = sorted(set(row_numbers))
            if not numbers:
                return {}
            chunks = [numbers[i : i + _CHUNK] for i in range(0, len(numbers), _CHUNK)]
        found: dict[int, dict[str, Any]] = {}
        async with self._db.read() as conn:
            for chunk in chunks:
                conditions = base if chunk is None else [*base, f.row_number.in_(chunk)]
                result = await conn.execute(stmt.where(*conditions).order_by(f.row_number))
                found.update((number, data) for number, data in result.all())
        return found
