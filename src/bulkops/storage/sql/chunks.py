"""ChunkStore on SQL: row ranges that workers claim independently.

On PostgreSQL a claim is ``SELECT ... FOR UPDATE SKIP LOCKED``: concurrent claimers skip the
chunks another one is taking instead of waiting for it. SQLite serialises writers anyway.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    exists,
    func,
    not_,
    or_,
    select,
    tuple_,
    update,
)

from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.records import ChunkRecord, OperationRecord
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.chunk_queries import claimable, fetch_chunk
from bulkops.storage.sql.codec import operation_from_row
from bulkops.storage.sql.deliveries import insert_deliveries
from bulkops.storage.sql.dialect import ChunkClaim
from bulkops.storage.sql.schema import chunks, operations
from bulkops.storage.states import ChunkState, OperationStatus

_c, _o = chunks.c, operations.c


def _chunk_values(chunk: ChunkRecord) -> dict[str, Any]:
    return {
        "operation_id": chunk.operation_id,
        "chunk_index": chunk.index,
        "first_row": chunk.first_row,
        "row_count": chunk.row_count,
        "byte_offset": chunk.offset,
        "state": chunk.state,
        "worker_id": chunk.worker_id,
        "heartbeat_at": chunk.heartbeat_at,
        "version": chunk.version,
        "resume_count": chunk.resume_count,
    }


class ChunkMethods(SqlBase):
    """The ChunkStore part of ``SqlStore``."""

    async def split(
        self, change: OperationChange, parts: Sequence[ChunkRecord]
    ) -> OperationRecord | None:
        """Apply the change and insert the chunks in one transaction."""
        stmt = (
            update(operations)
            .where(_o.id == change.operation_id, _o.version == change.expected_version)
            .values(**change.values)
        )
        async with self._db.write() as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                return None
            await conn.execute(chunks.insert(), [_chunk_values(part) for part in parts])
            await insert_deliveries(conn, change.deliveries)
            if self._events_here:
                await self._db.dialect.insert_events(conn, change.events)
            found = await conn.execute(select(operations).where(_o.id == change.operation_id))
            record = operation_from_row(found.mappings().one())
        if not self._events_here:
            await self._after_commit(change.events)
        return record

    async def claim_chunk(
        self,
        names: Collection[str],
        worker_id: str,
        now: datetime,
        stale_before: datetime,
        exclude: Collection[UUID] = (),
        among: Collection[UUID] | None = None,
        alive: Collection[str] = (),
        alive_before: datetime | None = None,
    ) -> ChunkRecord | None:
        """Claim one Pending (or abandoned) chunk of a Running operation in ``names``
        (not in ``exclude``, in ``among`` when given), of the highest priority first."""
        if not names or (among is not None and not among):
            return None
        claim = ChunkClaim(names, worker_id, now, stale_before, exclude, among, alive, alive_before)
        return await self._db.dialect.claim_chunk(claim)

    async def chunk_work(
        self,
        names: Collection[str],
        stale_before: datetime,
        alive: Collection[str] = (),
        alive_before: datetime | None = None,
        exclude: Collection[UUID] = (),
    ) -> int:
        """How many chunks could be claimed now (of operations not in ``exclude``)."""
        if not names:
            return 0
        conditions = claimable(names, stale_before, alive, alive_before)
        if exclude:
            conditions.append(_c.operation_id.not_in(sorted(exclude)))
        stmt = (
            select(func.count())
            .select_from(chunks)
            .join(operations, _o.id == _c.operation_id)
            .where(*conditions)
        )
        async with self._db.read() as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def get_chunk(self, operation_id: UUID, index: int) -> ChunkRecord | None:
        """One chunk, or None."""
        async with self._db.read() as conn:
            return await fetch_chunk(conn, operation_id, index)

    async def hand_back_stale_chunks(
        self, worker_id: str, stale_before: datetime, keep: Collection[tuple[UUID, int]] = ()
    ) -> Sequence[tuple[UUID, int]]:
        """Hand back the Running chunks ``worker_id`` holds with a void or older heartbeat,
        but those in ``keep``, in one statement."""
        conditions = [
            _c.state == ChunkState.RUNNING,
            _c.worker_id == worker_id,
            or_(_c.heartbeat_at.is_(None), _c.heartbeat_at < stale_before),
        ]
        if keep:
            conditions.append(not_(tuple_(_c.operation_id, _c.chunk_index).in_(sorted(keep))))
        stmt = (
            update(chunks)
            .where(*conditions)
            .values(
                state=ChunkState.PENDING, worker_id=None, heartbeat_at=None, version=_c.version + 1
            )
            .returning(_c.operation_id, _c.chunk_index)
        )
        async with self._db.write() as conn:
            return [(row[0], row[1]) for row in await conn.execute(stmt)]

    async def heartbeat_chunks(
        self, held: Collection[tuple[UUID, int]], worker_id: str, now: datetime
    ) -> set[tuple[UUID, int]]:
        """Renew the heartbeat of the chunks ``worker_id`` still holds among ``held``."""
        if not held:
            return set()
        stmt = (
            update(chunks)
            .where(
                tuple_(_c.operation_id, _c.chunk_index).in_(list(held)),
                _c.worker_id == worker_id,
                _c.state == ChunkState.RUNNING,
            )
            .values(heartbeat_at=now)
            .returning(_c.operation_id, _c.chunk_index)
        )
        async with self._db.write() as conn:
            rows = (await conn.execute(stmt)).all()
        return {(row[0], row[1]) for row in rows}

    async def end_chunk(
        self, operation_id: UUID, index: int, worker_id: str, *, done: bool
    ) -> int | None:
        """Mark a held chunk Done (or hand it back); returns the chunks not Done."""
        return await self._db.dialect.end_chunk(operation_id, index, worker_id, done=done)

    async def finished_splits(self) -> Sequence[UUID]:
        """Running operations whose chunks are all Done."""
        has_chunks = exists().where(_c.operation_id == _o.id)
        unfinished = exists().where(_c.operation_id == _o.id, _c.state != ChunkState.DONE)
        stmt = select(_o.id).where(_o.status == OperationStatus.RUNNING, has_chunks, ~unfinished)
        async with self._db.read() as conn:
            return list((await conn.execute(stmt)).scalars().all())
