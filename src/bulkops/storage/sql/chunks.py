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
    ColumnElement,
    RowMapping,
    and_,
    exists,
    func,
    not_,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.lifecycle import OperationChange
from bulkops.storage.records import ChunkRecord, OperationRecord
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.codec import operation_from_row
from bulkops.storage.sql.deliveries import insert_deliveries
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


def chunk_from_row(row: RowMapping) -> ChunkRecord:
    """The chunk stored in a ``chunks`` row."""
    return ChunkRecord(
        operation_id=row["operation_id"],
        index=row["chunk_index"],
        first_row=row["first_row"],
        row_count=row["row_count"],
        offset=row["byte_offset"],
        state=row["state"],
        worker_id=row["worker_id"],
        heartbeat_at=row["heartbeat_at"],
        version=row["version"],
        resume_count=row["resume_count"],
    )


def _claimable(
    names: Collection[str],
    stale_before: datetime,
    alive: Collection[str] = (),
    alive_before: datetime | None = None,
) -> list[ColumnElement[bool]]:
    stale: ColumnElement[bool] = _c.heartbeat_at < stale_before
    if alive:
        spared = and_(_c.worker_id.is_not(None), _c.worker_id.in_(sorted(alive)))
        if alive_before is not None:
            spared = and_(spared, _c.heartbeat_at >= alive_before)
        stale = and_(stale, not_(spared))
    return [
        _o.status == OperationStatus.RUNNING,
        func.lower(_o.operation_name).in_(sorted({name.casefold() for name in names})),
        or_(
            _c.state == ChunkState.PENDING,
            and_(_c.state == ChunkState.RUNNING, or_(_c.heartbeat_at.is_(None), stale)),
        ),
    ]


def _held(operation_id: UUID, index: int, worker_id: str) -> list[ColumnElement[bool]]:
    return [
        _c.operation_id == operation_id,
        _c.chunk_index == index,
        _c.worker_id == worker_id,
        _c.state == ChunkState.RUNNING,
    ]


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
        conditions = _claimable(names, stale_before, alive, alive_before)
        if exclude:
            conditions.append(_c.operation_id.not_in(sorted(exclude)))
        if among is not None:
            conditions.append(_c.operation_id.in_(sorted(among)))
        pick = (
            select(_c.operation_id, _c.chunk_index, _c.version, _c.state)
            .join(operations, _o.id == _c.operation_id)
            .where(*conditions)
            .order_by(_o.priority.desc(), _o.created_at, _c.operation_id, _c.chunk_index)
            .limit(1)
        )
        if self._db.dialect.name == "sqlite":
            # One writer at a time on SQLite: a claim that finds nothing (most often a
            # process looking for a chunk of another operation) takes no write lock from
            # the row writes of every process. The write below looks again.
            async with self._db.read() as conn:
                if (await conn.execute(pick)).first() is None:
                    return None
        pick = self._db.dialect.skip_locked(pick, of=chunks)
        async with self._db.write() as conn:
            found = (await conn.execute(pick)).first()
            if found is None:
                return None
            operation_id, index, version, state = found
            resumed = 1 if state == ChunkState.RUNNING else 0  # its holder stopped
            claim = (
                update(chunks)
                .where(
                    _c.operation_id == operation_id,
                    _c.chunk_index == index,
                    _c.version == version,
                )
                .values(
                    state=ChunkState.RUNNING,
                    worker_id=worker_id,
                    heartbeat_at=now,
                    version=_c.version + 1,
                    resume_count=_c.resume_count + resumed,
                )
            )
            if (await conn.execute(claim)).rowcount == 0:
                return None
            return await _fetch(conn, operation_id, index)

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
        conditions = _claimable(names, stale_before, alive, alive_before)
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
            return await _fetch(conn, operation_id, index)

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
        state = ChunkState.DONE if done else ChunkState.PENDING
        end = (
            update(chunks)
            .where(*_held(operation_id, index, worker_id))
            .values(state=state, worker_id=None, heartbeat_at=None, version=_c.version + 1)
        )
        left = (
            select(func.count())
            .select_from(chunks)
            .where(_c.operation_id == operation_id, _c.state != ChunkState.DONE)
        )
        async with self._db.write() as conn:
            # Serialises the ends of one operation's chunks: exactly one sees none left.
            await self._db.dialect.lock(conn, select(_o.id).where(_o.id == operation_id))
            if (await conn.execute(end)).rowcount == 0:
                return None
            return int((await conn.execute(left)).scalar_one())

    async def finished_splits(self) -> Sequence[UUID]:
        """Running operations whose chunks are all Done."""
        has_chunks = exists().where(_c.operation_id == _o.id)
        unfinished = exists().where(_c.operation_id == _o.id, _c.state != ChunkState.DONE)
        stmt = select(_o.id).where(_o.status == OperationStatus.RUNNING, has_chunks, ~unfinished)
        async with self._db.read() as conn:
            return list((await conn.execute(stmt)).scalars().all())


async def _fetch(conn: AsyncConnection, operation_id: UUID, index: int) -> ChunkRecord | None:
    stmt = select(chunks).where(_c.operation_id == operation_id, _c.chunk_index == index)
    row = (await conn.execute(stmt)).mappings().one_or_none()
    return None if row is None else chunk_from_row(row)
