"""Idempotency keys and rate-limit starts: the small shared ledgers of operation controls."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from sqlalchemy import and_, delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from bulkops.clock import utcnow
from bulkops.storage.records import IdempotencyKey, KeyInUse
from bulkops.storage.sql.base import SqlBase
from bulkops.storage.sql.dialect import Dialect
from bulkops.storage.sql.schema import idempotency_keys, rate_limit_starts


async def claim_key(
    dialect: Dialect,
    conn: AsyncConnection,
    key: IdempotencyKey,
    operation_id: UUID,
    now: datetime,
) -> KeyInUse | None:
    """Within the caller's transaction: record the key for ``operation_id``, or return its
    unexpired earlier use. Of two transactions with one key, the second waits for the
    first (the primary key) and then finds its use."""
    k = idempotency_keys.c
    same = and_(k.principal == key.principal, k.key == key.key)
    await conn.execute(delete(idempotency_keys).where(same, k.created_at < key.expires_before))
    values = {
        "principal": key.principal,
        "key": key.key,
        "fingerprint": key.fingerprint,
        "operation_id": operation_id,
        "created_at": now,
    }
    insert = dialect.insert_new(idempotency_keys, values, ("principal", "key"))
    # rowcount is not reliable for ON CONFLICT on every driver
    insert = insert.returning(k.key)
    if (await conn.execute(insert)).first() is not None:
        return None
    used = (await conn.execute(select(k.operation_id, k.fingerprint).where(same))).one()
    return KeyInUse(operation_id=used[0], fingerprint=used[1])


async def find_key(conn: AsyncConnection, key: IdempotencyKey) -> KeyInUse | None:
    """The principal's unexpired use of ``key``, if any (nothing recorded)."""
    k = idempotency_keys.c
    used = (
        await conn.execute(
            select(k.operation_id, k.fingerprint).where(
                k.principal == key.principal,
                k.key == key.key,
                k.created_at >= key.expires_before,
            )
        )
    ).first()
    return None if used is None else KeyInUse(operation_id=used[0], fingerprint=used[1])


class RateLimitMethods(SqlBase):
    """The RateLimitStore part of ``SqlStore``: a sliding log of starts per key."""

    async def acquire(self, key: str, limit: int, period: float) -> float:
        """Record a rate-limited start when the window has room; else the seconds to wait."""
        r = rate_limit_starts.c
        async with self._db.write() as conn:
            await self._db.dialect.serialise(conn, key)
            now = utcnow()  # read under the lock: decisions are ordered in time
            window = now - timedelta(seconds=period)
            await conn.execute(
                delete(rate_limit_starts).where(r.key == key, r.started_at <= window)
            )
            count, oldest = (
                await conn.execute(
                    select(func.count(), func.min(r.started_at)).where(
                        r.key == key, r.started_at > window
                    )
                )
            ).one()
            if count < limit:
                await conn.execute(rate_limit_starts.insert().values(key=key, started_at=now))
                return 0.0
        wait: float = (oldest - window).total_seconds()
        return max(wait, 0.001)
