"""The chunk queries the SQL chunk store and PostgreSQL's claim share: which chunks may be
claimed, and reading one."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from uuid import UUID

from sqlalchemy import ColumnElement, and_, func, not_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.storage.records import ChunkRecord
from bulkops.storage.sql.codec import CHUNK_COLUMNS, decode_chunk
from bulkops.storage.sql.schema import chunks, operations
from bulkops.storage.states import ChunkState, OperationStatus

_c, _o = chunks.c, operations.c


def claimable(
    names: Collection[str],
    stale_before: datetime,
    alive: Collection[str] = (),
    alive_before: datetime | None = None,
) -> list[ColumnElement[bool]]:
    """The conditions of a claimable chunk: of a Running operation in ``names``, Pending, or
    Running with a void heartbeat or one older than ``stale_before`` (a holder in ``alive``
    keeps it until ``alive_before``)."""
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


async def fetch_chunk(conn: AsyncConnection, operation_id: UUID, index: int) -> ChunkRecord | None:
    """One chunk read in ``conn``'s transaction, or None."""
    columns = [_c[name] for name in CHUNK_COLUMNS]
    stmt = select(*columns).where(_c.operation_id == operation_id, _c.chunk_index == index)
    row = (await conn.execute(stmt)).one_or_none()
    return None if row is None else decode_chunk(row)


def held_by(operation_id: UUID, index: int, worker_id: str) -> list[ColumnElement[bool]]:
    """The conditions of a chunk ``worker_id`` holds."""
    return [
        _c.operation_id == operation_id,
        _c.chunk_index == index,
        _c.worker_id == worker_id,
        _c.state == ChunkState.RUNNING,
    ]
