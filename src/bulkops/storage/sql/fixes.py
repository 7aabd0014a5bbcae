"""Rows fixed in place on SQL: the row's new data and its fix, in one transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, select, update

from bulkops.storage.records import EventRecord, RowRecord
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.codec import row_from_mapping
from bulkops.storage.sql.pages import in_states
from bulkops.storage.sql.schema import row_fixes, row_records
from bulkops.storage.states import RowState

_CHUNK = 5_000  # row numbers per IN list, well under every database's parameter limit


class FixMethods(SqlBase):
    """The fixes part of ``SqlStore`` (``RowStore.fix_row`` and ``RowStore.fixes``)."""

    async def fix_row(
        self,
        operation_id: UUID,
        row_number: int,
        row_data: dict[str, Any],
        now: datetime,
        events: Sequence[EventRecord] = (),
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
            fix_key = (f.operation_id == operation_id, f.row_number == row_number)
            earlier = (
                await conn.execute(select(f.row_data, f.original_data).where(*fix_key))
            ).one_or_none()
            # The first data stays the data before the first fix (NULL: fixed before it
            # was kept, and so unknown).
            original = row.row_data if earlier is None else earlier.original_data
            await conn.execute(row_fixes.delete().where(*fix_key))
            await conn.execute(
                row_fixes.insert().values(
                    operation_id=operation_id,
                    row_number=row_number,
                    row_data=row_data,
                    fixed_at=now,
                    original_data=original,
                )
            )
            if events and self._events_here:
                await self._db.dialect.insert_events(conn, events)
        if events and not self._events_here:
            await self._after_commit(events)
        row.row_data = row_data
        return row

    async def originals(
        self, operation_id: UUID, row_numbers: Collection[int]
    ) -> dict[int, dict[str, Any]]:
        """The data before their first fix of the fixed rows among ``row_numbers``; see
        ``RowStore.originals``."""
        f = row_fixes.c
        numbers = sorted(set(row_numbers))
        found: dict[int, dict[str, Any]] = {}
        async with self._db.read() as conn:
            for i in range(0, len(numbers), _CHUNK):
                stmt = select(f.row_number, f.original_data).where(
                    f.operation_id == operation_id,
                    f.row_number.in_(numbers[i : i + _CHUNK]),
                    f.original_data.is_not(None),
                )
                found.update((n, data) for n, data in (await conn.execute(stmt)).all())
        return found

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
